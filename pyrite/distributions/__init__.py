"""Probability distributions, as torch.distributions: `Distribution` and its families, their
`constraints`, and `kl_divergence` with its registry (`register_kl`).

    d = pr.distributions.Normal(loc, scale)
    x = d.rsample((64,))          # differentiable with respect to loc and scale
    loss = -d.log_prob(x).mean()

Families: Normal, Bernoulli, Categorical, OneHotCategorical, Uniform, Beta, Gamma, Exponential,
Laplace, MultivariateNormal, Independent; LogNormal, LogisticNormal, Cauchy, HalfNormal,
HalfCauchy, Gumbel, StudentT, Chi2, Dirichlet, Poisson, Binomial, Multinomial, NegativeBinomial,
Geometric, ContinuousBernoulli,
RelaxedBernoulli, RelaxedOneHotCategorical (and their Logit/Exp bases),
LowRankMultivariateNormal, MixtureSameFamily and TransformedDistribution with the `transforms`
module. Gamma, Beta, Chi2
and Dirichlet sample by rejection without a gradient (`has_rsample = False`, where torch
reparameterizes them), and StudentT's rsample has no gradient for df; Gamma has no cdf.
"""

from __future__ import annotations

from . import constraints, transforms
from .bernoulli import Bernoulli
from .binomial import Binomial
from .categorical import Categorical, OneHotCategorical
from .cauchy import Cauchy
from .chi2 import Chi2
from .continuous_bernoulli import ContinuousBernoulli
from .dirichlet import Dirichlet
from .distribution import Distribution
from .exponential import Exponential
from .gamma import Beta, Gamma
from .geometric import Geometric
from .gumbel import Gumbel
from .half import HalfCauchy, HalfNormal
from .independent import Independent
from .kl import kl_divergence, register_kl
from .laplace import Laplace
from .log_normal import LogNormal
from .logistic_normal import LogisticNormal
from .lowrank_multivariate_normal import LowRankMultivariateNormal
from .mixture_same_family import MixtureSameFamily
from .multinomial import Multinomial
from .multivariate_normal import MultivariateNormal
from .negative_binomial import NegativeBinomial
from .normal import Normal
from .poisson import Poisson
from .relaxed import (
    ExpRelaxedCategorical,
    LogitRelaxedBernoulli,
    RelaxedBernoulli,
    RelaxedOneHotCategorical,
)
from .student_t import StudentT
from .transformed_distribution import TransformedDistribution
from .transforms import (
    AbsTransform,
    AffineTransform,
    ComposeTransform,
    ExpTransform,
    IndependentTransform,
    PowerTransform,
    SigmoidTransform,
    SoftmaxTransform,
    StickBreakingTransform,
    TanhTransform,
    Transform,
)
from .uniform import Uniform

__all__ = [
    "AbsTransform",
    "AffineTransform",
    "Bernoulli",
    "Beta",
    "Binomial",
    "Categorical",
    "Cauchy",
    "Chi2",
    "ComposeTransform",
    "ContinuousBernoulli",
    "Dirichlet",
    "Distribution",
    "ExpRelaxedCategorical",
    "ExpTransform",
    "Exponential",
    "Gamma",
    "Geometric",
    "Gumbel",
    "HalfCauchy",
    "HalfNormal",
    "Independent",
    "IndependentTransform",
    "Laplace",
    "LogNormal",
    "LogisticNormal",
    "LogitRelaxedBernoulli",
    "LowRankMultivariateNormal",
    "MixtureSameFamily",
    "Multinomial",
    "MultivariateNormal",
    "NegativeBinomial",
    "Normal",
    "OneHotCategorical",
    "Poisson",
    "PowerTransform",
    "RelaxedBernoulli",
    "RelaxedOneHotCategorical",
    "SigmoidTransform",
    "SoftmaxTransform",
    "StickBreakingTransform",
    "StudentT",
    "TanhTransform",
    "Transform",
    "TransformedDistribution",
    "Uniform",
    "constraints",
    "kl_divergence",
    "register_kl",
    "transforms",
]
