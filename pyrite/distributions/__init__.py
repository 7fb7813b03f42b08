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
module; Weibull, Pareto, InverseGamma, Kumaraswamy, FisherSnedecor, VonMises,
OneHotCategoricalStraightThrough, Wishart and LKJCholesky; `biject_to` / `transform_to`
(the constraint registries). Gamma, Beta, Chi2, Dirichlet, InverseGamma and FisherSnedecor
sample by rejection without a gradient (`has_rsample = False`, where torch reparameterizes
them), and StudentT's and Wishart's rsample have no gradient for df; Gamma has no cdf.
"""

from __future__ import annotations

# kl_more: importing it registers the kl_divergence pairs of Pareto, InverseGamma and kin
from . import constraint_registry, constraints, kl_more, transforms  # noqa: F401
from .bernoulli import Bernoulli
from .binomial import Binomial
from .categorical import Categorical, OneHotCategorical
from .cauchy import Cauchy
from .chi2 import Chi2
from .constraint_registry import biject_to, transform_to
from .continuous_bernoulli import ContinuousBernoulli
from .dirichlet import Dirichlet
from .distribution import Distribution
from .exponential import Exponential
from .fishersnedecor import FisherSnedecor
from .gamma import Beta, Gamma
from .geometric import Geometric
from .gumbel import Gumbel
from .half import HalfCauchy, HalfNormal
from .independent import Independent
from .inverse_gamma import InverseGamma
from .kl import kl_divergence, register_kl
from .kumaraswamy import Kumaraswamy
from .laplace import Laplace
from .lkj_cholesky import LKJCholesky
from .log_normal import LogNormal
from .logistic_normal import LogisticNormal
from .lowrank_multivariate_normal import LowRankMultivariateNormal
from .mixture_same_family import MixtureSameFamily
from .multinomial import Multinomial
from .multivariate_normal import MultivariateNormal
from .negative_binomial import NegativeBinomial
from .normal import Normal
from .pareto import Pareto
from .poisson import Poisson
from .relaxed import (
    ExpRelaxedCategorical,
    LogitRelaxedBernoulli,
    RelaxedBernoulli,
    RelaxedOneHotCategorical,
)
from .straight_through import OneHotCategoricalStraightThrough
from .student_t import StudentT
from .transformed_distribution import TransformedDistribution
from .transforms import (
    AbsTransform,
    AffineTransform,
    CatTransform,
    ComposeTransform,
    CorrCholeskyTransform,
    ExpTransform,
    IndependentTransform,
    LowerCholeskyTransform,
    PositiveDefiniteTransform,
    PowerTransform,
    ReshapeTransform,
    SigmoidTransform,
    SoftmaxTransform,
    SoftplusTransform,
    StackTransform,
    StickBreakingTransform,
    TanhTransform,
    Transform,
)
from .uniform import Uniform
from .von_mises import VonMises
from .weibull import Weibull
from .wishart import Wishart

__all__ = [
    "AbsTransform",
    "AffineTransform",
    "Bernoulli",
    "Beta",
    "Binomial",
    "CatTransform",
    "Categorical",
    "Cauchy",
    "Chi2",
    "ComposeTransform",
    "ContinuousBernoulli",
    "CorrCholeskyTransform",
    "Dirichlet",
    "Distribution",
    "ExpRelaxedCategorical",
    "ExpTransform",
    "Exponential",
    "FisherSnedecor",
    "Gamma",
    "Geometric",
    "Gumbel",
    "HalfCauchy",
    "HalfNormal",
    "Independent",
    "IndependentTransform",
    "InverseGamma",
    "Kumaraswamy",
    "LKJCholesky",
    "Laplace",
    "LogNormal",
    "LogisticNormal",
    "LogitRelaxedBernoulli",
    "LowRankMultivariateNormal",
    "LowerCholeskyTransform",
    "MixtureSameFamily",
    "Multinomial",
    "MultivariateNormal",
    "NegativeBinomial",
    "Normal",
    "OneHotCategorical",
    "OneHotCategoricalStraightThrough",
    "Pareto",
    "Poisson",
    "PositiveDefiniteTransform",
    "PowerTransform",
    "RelaxedBernoulli",
    "RelaxedOneHotCategorical",
    "ReshapeTransform",
    "SigmoidTransform",
    "SoftmaxTransform",
    "SoftplusTransform",
    "StackTransform",
    "StickBreakingTransform",
    "StudentT",
    "TanhTransform",
    "Transform",
    "TransformedDistribution",
    "Uniform",
    "VonMises",
    "Weibull",
    "Wishart",
    "biject_to",
    "constraints",
    "kl_divergence",
    "register_kl",
    "transform_to",
    "transforms",
]
