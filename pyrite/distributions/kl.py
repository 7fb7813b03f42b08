"""kl_divergence(p, q) and its registry, as torch.distributions.kl: `register_kl(P, Q)`
decorates a function of (p, q); a call dispatches on the most specific registered pair of
(type(p), type(q)) by their classes' method resolution order."""

from __future__ import annotations

import math
import warnings
from functools import total_ordering

import pyrite as pr

from .bernoulli import Bernoulli
from .binomial import Binomial
from .categorical import Categorical, OneHotCategorical
from .cauchy import Cauchy
from .continuous_bernoulli import ContinuousBernoulli
from .dirichlet import Dirichlet
from .distribution import Distribution
from .exponential import Exponential
from .gamma import Beta, Gamma
from .geometric import Geometric
from .gumbel import Gumbel
from .half import HalfNormal
from .independent import Independent
from .laplace import Laplace
from .lowrank_multivariate_normal import (
    LowRankMultivariateNormal,
    _batch_lowrank_logdet,
    _batch_lowrank_mahalanobis,
)
from .multivariate_normal import MultivariateNormal, _batch_mahalanobis
from .normal import Normal
from .poisson import Poisson
from .transformed_distribution import TransformedDistribution
from .uniform import Uniform
from .utils import sum_rightmost

__all__ = ["kl_divergence", "register_kl"]

_KL_REGISTRY: dict = {}  # (type_p, type_q) -> function
_KL_MEMOIZE: dict = {}  # (type(p), type(q)) -> the function chosen for it


def register_kl(type_p, type_q):
    """A decorator registering a KL divergence between subclasses of `type_p` and `type_q`:

    @register_kl(Normal, Normal)
    def kl_normal_normal(p, q): ...
    """
    if not isinstance(type_p, type) or not issubclass(type_p, Distribution):
        raise TypeError(f"Expected type_p to be a Distribution subclass but got {type_p}")
    if not isinstance(type_q, type) or not issubclass(type_q, Distribution):
        raise TypeError(f"Expected type_q to be a Distribution subclass but got {type_q}")

    def decorator(fun):
        _KL_REGISTRY[type_p, type_q] = fun
        _KL_MEMOIZE.clear()  # a new rule may be more specific than a cached one
        return fun

    return decorator


@total_ordering
class _Match:
    """A registered (P, Q) pair, ordered so that a pair of subclasses sorts first."""

    __slots__ = ["types"]

    def __init__(self, *types):
        self.types = types

    def __eq__(self, other):
        return self.types == other.types

    def __le__(self, other):
        for x, y in zip(self.types, other.types):
            if not issubclass(x, y):
                return False
            if x is not y:
                break
        return True


def _dispatch_kl(type_p, type_q):
    matches = [(p, q) for p, q in _KL_REGISTRY if issubclass(type_p, p) and issubclass(type_q, q)]
    if not matches:
        return NotImplemented
    left_p, left_q = min(_Match(*m) for m in matches).types
    right_q, right_p = min(_Match(*reversed(m)) for m in matches).types
    left_fun = _KL_REGISTRY[left_p, left_q]
    right_fun = _KL_REGISTRY[right_p, right_q]
    if left_fun is not right_fun:
        warnings.warn(
            f"Ambiguous kl_divergence({type_p.__name__}, {type_q.__name__}). "
            f"Please register_kl({left_p.__name__}, {right_q.__name__})",
            RuntimeWarning,
            stacklevel=2,
        )
    return left_fun


def kl_divergence(p, q):
    """KL(p || q) = E_p[log p(x) - log q(x)], of the two distributions' broadcast batch shape.
    Raises NotImplementedError for a pair with no registered rule."""
    key = (type(p), type(q))
    try:
        fun = _KL_MEMOIZE[key]
    except KeyError:
        fun = _KL_MEMOIZE[key] = _dispatch_kl(*key)
    if fun is NotImplemented:
        raise NotImplementedError(
            f"No KL(p || q) is implemented for p type {type(p).__name__} "
            f"and q type {type(q).__name__}"
        )
    return fun(p, q)


# ---- helpers ---------------------------------------------------------------------------------
_EULER_GAMMA = 0.57721566490153286060


def _inf_like(t):
    return pr.full_like(t, math.inf)


def _infinite_where(result, mask):
    return pr.where(mask, pr.full_like(result, math.inf), result)


def _lbeta(a, b):
    return pr.lgamma(a) + pr.lgamma(b) - pr.lgamma(a + b)


def _neg_ce_normal(mean, var, q):
    """E_p[log q(x)] for q Normal, from p's mean and variance."""
    return (
        -pr.log(q.scale)
        - 0.5 * math.log(2 * math.pi)
        - (var + (mean - q.loc).pow(2)) / (2 * q.scale.pow(2))
    )


def _neg_ce_exponential(mean, q):
    return pr.log(q.rate) - q.rate * mean


def _neg_ce_gamma(mean, mean_log, q):
    a, r = q.concentration, q.rate
    return a * pr.log(r) - pr.lgamma(a) + (a - 1) * mean_log - r * mean


# ---- same family -----------------------------------------------------------------------------
@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p, q):
    sp = pr.nn.functional.softplus
    t1 = p.probs * (sp(-q.logits) - sp(-p.logits))
    t1 = _infinite_where(t1, q.probs == 0)
    t1 = pr.where(p.probs == 0, pr.zeros_like(t1), t1)
    t2 = (1 - p.probs) * (sp(q.logits) - sp(p.logits))
    t2 = _infinite_where(t2, q.probs == 1)
    t2 = pr.where(p.probs == 1, pr.zeros_like(t2), t2)
    return t1 + t2


@register_kl(Beta, Beta)
def _kl_beta_beta(p, q):
    a1, b1 = p.concentration1, p.concentration0
    a2, b2 = q.concentration1, q.concentration0
    total = a1 + b1
    return (
        _lbeta(a2, b2)
        - _lbeta(a1, b1)
        + (a1 - a2) * pr.digamma(a1)
        + (b1 - b2) * pr.digamma(b1)
        + (a2 - a1 + b2 - b1) * pr.digamma(total)
    )


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p, q):
    t = p.probs * (p.logits - q.logits)
    t = _infinite_where(t, (q.probs == 0).expand(tuple(t.shape)))
    t = pr.where((p.probs == 0).expand(tuple(t.shape)), pr.zeros_like(t), t)
    return t.sum(-1)


@register_kl(OneHotCategorical, OneHotCategorical)
def _kl_onehotcategorical_onehotcategorical(p, q):
    return _kl_categorical_categorical(p._categorical, q._categorical)


@register_kl(Exponential, Exponential)
def _kl_exponential_exponential(p, q):
    ratio = q.rate / p.rate
    return ratio - 1 - pr.log(ratio)


@register_kl(Gamma, Gamma)
def _kl_gamma_gamma(p, q):
    ap, rp, aq, rq = p.concentration, p.rate, q.concentration, q.rate
    return (
        (ap - aq) * pr.digamma(ap)
        - pr.lgamma(ap)
        + pr.lgamma(aq)
        + aq * (pr.log(rp) - pr.log(rq))
        + ap * (rq - rp) / rp
    )


@register_kl(Laplace, Laplace)
def _kl_laplace_laplace(p, q):
    ratio = p.scale / q.scale
    dist = pr.abs(p.loc - q.loc)
    return -pr.log(ratio) + dist / q.scale + ratio * pr.exp(-dist / p.scale) - 1


@register_kl(Normal, Normal)
def _kl_normal_normal(p, q):
    var_ratio = (p.scale / q.scale).pow(2)
    t1 = ((p.loc - q.loc) / q.scale).pow(2)
    return 0.5 * (var_ratio + t1 - 1 - pr.log(var_ratio))


@register_kl(MultivariateNormal, MultivariateNormal)
def _kl_mvn_mvn(p, q):
    if p.event_shape != q.event_shape:
        raise ValueError(
            "KL-divergence between two Multivariate Normals with different event shapes "
            "cannot be computed"
        )
    n = p.event_shape[0]
    Lp, Lq = p._unbroadcasted_scale_tril, q._unbroadcasted_scale_tril
    half_logdet = Lq.diagonal(dim1=-2, dim2=-1).log().sum(-1) - Lp.diagonal(
        dim1=-2, dim2=-1
    ).log().sum(-1)
    # tr(Sq^-1 Sp) = |Lq^-1 Lp|_F^2
    batch = pr.broadcast_shapes(tuple(Lp.shape[:-2]), tuple(Lq.shape[:-2]))
    full = tuple(batch) + (n, n)
    m = pr.linalg.solve_triangular(Lq.expand(full), Lp.expand(full), upper=False)
    trace = m.pow(2).sum((-2, -1))
    maha = _batch_mahalanobis(Lq, q.loc - p.loc)
    result = half_logdet + 0.5 * (trace + maha - n)
    return result.expand(tuple(p.batch_shape))


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p, q):
    result = pr.log((q.high - q.low) / (p.high - p.low))
    return _infinite_where(result, (q.low > p.low) | (q.high < p.high))


@register_kl(Independent, Independent)
def _kl_independent_independent(p, q):
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError
    result = kl_divergence(p.base_dist, q.base_dist)
    return sum_rightmost(result, p.reinterpreted_batch_ndims)


@register_kl(Binomial, Binomial)
def _kl_binomial_binomial(p, q):
    # from p's moments; defined only where the supports nest (q's count covers p's)
    if bool((p.total_count < q.total_count).any()):
        raise NotImplementedError(
            "KL between Binomials where q.total_count > p.total_count is not implemented"
        )
    kl = p.total_count * (p.probs * (p.logits - q.logits) + (-p.probs).log1p() - (-q.probs).log1p())
    return _infinite_where(kl, p.total_count > q.total_count)


@register_kl(Cauchy, Cauchy)
def _kl_cauchy_cauchy(p, q):
    # Chyzak and Nielsen (2019): log(((s_p + s_q)^2 + (m_p - m_q)^2) / (4 s_p s_q))
    num = (p.scale + q.scale).pow(2) + (p.loc - q.loc).pow(2)
    return (num / (4 * p.scale * q.scale)).log()


@register_kl(ContinuousBernoulli, ContinuousBernoulli)
def _kl_continuous_bernoulli_continuous_bernoulli(p, q):
    t1 = p.mean * (p.logits - q.logits)
    t2 = p._cont_bern_log_norm() + (-p.probs).log1p()
    t3 = -q._cont_bern_log_norm() - (-q.probs).log1p()
    return t1 + t2 + t3


@register_kl(Dirichlet, Dirichlet)
def _kl_dirichlet_dirichlet(p, q):
    sum_p = p.concentration.sum(-1)
    sum_q = q.concentration.sum(-1)
    t1 = sum_p.lgamma() - sum_q.lgamma()
    t2 = (p.concentration.lgamma() - q.concentration.lgamma()).sum(-1)
    t3 = p.concentration - q.concentration
    t4 = p.concentration.digamma() - sum_p.digamma().unsqueeze(-1)
    return t1 - t2 + (t3 * t4).sum(-1)


@register_kl(Geometric, Geometric)
def _kl_geometric_geometric(p, q):
    return -p.entropy() - (-q.probs).log1p() / p.probs - q.logits


@register_kl(Gumbel, Gumbel)
def _kl_gumbel_gumbel(p, q):
    ct1 = p.scale / q.scale
    ct2 = q.loc / q.scale
    ct3 = p.loc / q.scale
    t1 = -ct1.log() - ct2 + ct3
    t2 = ct1 * _EULER_GAMMA
    t3 = (ct2 + (1 + ct1).lgamma() - ct3).exp()
    return t1 + t2 + t3 - (1 + _EULER_GAMMA)


@register_kl(HalfNormal, HalfNormal)
def _kl_halfnormal_halfnormal(p, q):
    return _kl_normal_normal(p.base_dist, q.base_dist)


@register_kl(Poisson, Poisson)
def _kl_poisson_poisson(p, q):
    return p.rate * (p.rate.log() - q.rate.log()) - (p.rate - q.rate)


@register_kl(TransformedDistribution, TransformedDistribution)
def _kl_transformed_transformed(p, q):
    # KL is invariant under a common bijection: that of the bases (LogNormal's, say)
    if p.transforms != q.transforms:
        raise NotImplementedError
    if p.event_shape != q.event_shape:
        raise NotImplementedError
    return kl_divergence(p.base_dist, q.base_dist)


def _lowrank_terms(p):
    """(covariance factor W, diagonal D, log det Sigma) of a low-rank normal."""
    W, D = p._unbroadcasted_cov_factor, p._unbroadcasted_cov_diag
    return W, D, _batch_lowrank_logdet(W, D, p._capacitance_tril)


def _kl_gaussian(p_loc, p_cov_trace_fn, p_logdet, q, n):
    """KL(p || q) for a Gaussian p (its loc, a function giving tr(Sigma_q^-1 Sigma_p), and
    log det Sigma_p) against a LowRankMultivariateNormal or MultivariateNormal q."""
    diff = q.loc - p_loc
    if isinstance(q, LowRankMultivariateNormal):
        Wq, Dq, q_logdet = _lowrank_terms(q)
        maha = _batch_lowrank_mahalanobis(Wq, Dq, diff, q._capacitance_tril)
    else:
        Lq = q._unbroadcasted_scale_tril
        q_logdet = 2 * Lq.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        maha = _batch_mahalanobis(Lq, diff)
    return 0.5 * (q_logdet - p_logdet + p_cov_trace_fn(q) + maha - n)


def _trace_q_inv(q, sigma_p):
    """tr(Sigma_q^-1 Sigma_p) = sum of Sigma_q's precision times Sigma_p, elementwise."""
    return (q.precision_matrix * sigma_p).sum((-2, -1))


def _register_lowrank_pairs():
    def kl_lowrank_p(p, q):
        if p.event_shape != q.event_shape:
            raise ValueError(
                "KL-divergence between two (Low Rank) Multivariate Normals with different "
                "event shapes cannot be computed"
            )
        _, _, p_logdet = _lowrank_terms(p)
        sigma_p = p.covariance_matrix
        return _kl_gaussian(
            p.loc, lambda q: _trace_q_inv(q, sigma_p), p_logdet, q, p.event_shape[0]
        )

    def kl_mvn_p(p, q):
        if p.event_shape != q.event_shape:
            raise ValueError(
                "KL-divergence between two (Low Rank) Multivariate Normals with different "
                "event shapes cannot be computed"
            )
        Lp = p._unbroadcasted_scale_tril
        p_logdet = 2 * Lp.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        sigma_p = p.covariance_matrix
        return _kl_gaussian(
            p.loc, lambda q: _trace_q_inv(q, sigma_p), p_logdet, q, p.event_shape[0]
        )

    register_kl(LowRankMultivariateNormal, LowRankMultivariateNormal)(kl_lowrank_p)
    register_kl(LowRankMultivariateNormal, MultivariateNormal)(kl_lowrank_p)
    register_kl(MultivariateNormal, LowRankMultivariateNormal)(kl_mvn_p)


_register_lowrank_pairs()


# ---- different families: -H(p) - E_p[log q] from p's moments ----------------------------------
@register_kl(Beta, Exponential)
def _kl_beta_exponential(p, q):
    return -p.entropy() - _neg_ce_exponential(p.mean, q)


@register_kl(Beta, Gamma)
def _kl_beta_gamma(p, q):
    a, b = p.concentration1, p.concentration0
    mean_log = pr.digamma(a) - pr.digamma(a + b)
    return -p.entropy() - _neg_ce_gamma(p.mean, mean_log, q)


@register_kl(Beta, Normal)
def _kl_beta_normal(p, q):
    return -p.entropy() - _neg_ce_normal(p.mean, p.variance, q)


@register_kl(Beta, Uniform)
def _kl_beta_uniform(p, q):
    result = -p.entropy() + pr.log(q.high - q.low)
    return _infinite_where(result, (q.low > 0) | (q.high < 1))


@register_kl(Exponential, Gamma)
def _kl_exponential_gamma(p, q):
    mean_log = -_EULER_GAMMA - pr.log(p.rate)
    return -p.entropy() - _neg_ce_gamma(p.mean, mean_log, q)


@register_kl(Exponential, Normal)
def _kl_exponential_normal(p, q):
    return -p.entropy() - _neg_ce_normal(p.mean, p.variance, q)


@register_kl(Gamma, Exponential)
def _kl_gamma_exponential(p, q):
    return -p.entropy() - _neg_ce_exponential(p.mean, q)


@register_kl(Gamma, Normal)
def _kl_gamma_normal(p, q):
    return -p.entropy() - _neg_ce_normal(p.mean, p.variance, q)


@register_kl(Laplace, Normal)
def _kl_laplace_normal(p, q):
    return -p.entropy() - _neg_ce_normal(p.mean, p.variance, q)


@register_kl(Normal, Laplace)
def _kl_normal_laplace(p, q):
    # E|x - m| for x ~ N(mu, s^2): s sqrt(2/pi) exp(-d^2 / 2s^2) + d erf(d / (s sqrt 2)), d = mu-m
    d = p.loc - q.loc
    s = p.scale
    mean_abs = s * math.sqrt(2 / math.pi) * pr.exp(-(d / s).pow(2) / 2) + d * pr.erf(
        d / (s * math.sqrt(2))
    )
    return -p.entropy() + pr.log(2 * q.scale) + mean_abs / q.scale


def _uniform_mean_log(low, high):
    """E[log x] for x ~ U[low, high], low >= 0 ((h log h - l log l) / (h - l) - 1)."""
    return (pr.xlogy(high, high) - pr.xlogy(low, low)) / (high - low) - 1


@register_kl(Uniform, Beta)
def _kl_uniform_beta(p, q):
    lo, hi = p.low, p.high
    mean_log = _uniform_mean_log(lo, hi)
    mean_log1m = _uniform_mean_log(1 - hi, 1 - lo)
    a, b = q.concentration1, q.concentration0
    result = -p.entropy() + _lbeta(a, b) - (a - 1) * mean_log - (b - 1) * mean_log1m
    return _infinite_where(result, (hi > 1) | (lo < 0))


@register_kl(Uniform, Exponential)
def _kl_uniform_exponential(p, q):
    result = -p.entropy() - _neg_ce_exponential(p.mean, q)
    return _infinite_where(result, p.low < 0)


@register_kl(Uniform, Gamma)
def _kl_uniform_gamma(p, q):
    mean_log = _uniform_mean_log(p.low, p.high)
    result = -p.entropy() - _neg_ce_gamma(p.mean, mean_log, q)
    return _infinite_where(result, p.low < 0)


@register_kl(Uniform, Normal)
def _kl_uniform_normal(p, q):
    return -p.entropy() - _neg_ce_normal(p.mean, p.variance, q)


# ---- a real-line p against a q of bounded or half-bounded support: infinite -------------------
def _register_infinite(type_p, types_q, param):
    def fun(p, q):
        return _inf_like(getattr(p, param))

    for type_q in types_q:
        register_kl(type_p, type_q)(fun)


_register_infinite(Exponential, (Beta, Uniform), "rate")
_register_infinite(Gamma, (Beta, Uniform), "concentration")
_register_infinite(Laplace, (Beta, Exponential, Gamma, Uniform), "loc")
_register_infinite(Normal, (Beta, Exponential, Gamma, Uniform), "loc")
