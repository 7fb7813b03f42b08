"""Probability distributions, as torch.distributions: `Distribution` and its families, their
`constraints`, and `kl_divergence` with its registry (`register_kl`).

    d = pr.distributions.Normal(loc, scale)
    x = d.rsample((64,))          # differentiable with respect to loc and scale
    loss = -d.log_prob(x).mean()

Families: Normal, Bernoulli, Categorical, OneHotCategorical, Uniform, Beta, Gamma, Exponential,
Laplace, MultivariateNormal, Independent. Gamma and Beta sample by rejection without a gradient
(`has_rsample = False`, where torch reparameterizes them); Gamma has no cdf.
"""

from __future__ import annotations

from . import constraints
from .bernoulli import Bernoulli
from .categorical import Categorical, OneHotCategorical
from .distribution import Distribution
from .exponential import Exponential
from .gamma import Beta, Gamma
from .independent import Independent
from .kl import kl_divergence, register_kl
from .laplace import Laplace
from .multivariate_normal import MultivariateNormal
from .normal import Normal
from .uniform import Uniform

__all__ = [
    "Bernoulli",
    "Beta",
    "Categorical",
    "Distribution",
    "Exponential",
    "Gamma",
    "Independent",
    "Laplace",
    "MultivariateNormal",
    "Normal",
    "OneHotCategorical",
    "Uniform",
    "constraints",
    "kl_divergence",
    "register_kl",
]
