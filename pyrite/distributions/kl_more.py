"""The kl_divergence pairs torch registers for the third wave of families (importing this
module registers them).

Pareto's support [scale, inf) is unbounded above and bounded below, so against a family on a
bounded or the whole real line one side is infinite; the finite ones are Pareto-Pareto,
Pareto against Exponential, Gamma and Normal (infinite where p's moments are), and
Uniform-Pareto.

InverseGamma, Weibull and Kumaraswamy have no rule of their own in torch: they reach its
TransformedDistribution pair, which answers KL of the bases when both transform lists are
equal (torch compares PowerTransform / AffineTransform by their parameters) and raises
NotImplementedError otherwise. pyrite's transforms compare by identity, so these pairs are
written out with torch's outcome: InverseGamma's transform is always 1 / x (KL of the
Gammas), Weibull's and Kumaraswamy's are equal only where every parameter is (KL 0).
"""

from __future__ import annotations

import math

import pyrite as pr

from .bernoulli import Bernoulli
from .binomial import Binomial
from .continuous_bernoulli import ContinuousBernoulli
from .exponential import Exponential
from .gamma import Beta, Gamma
from .gumbel import Gumbel
from .inverse_gamma import InverseGamma
from .kl import kl_divergence, register_kl
from .kumaraswamy import Kumaraswamy
from .laplace import Laplace
from .normal import Normal
from .pareto import Pareto
from .poisson import Poisson
from .uniform import Uniform
from .weibull import Weibull
from .wishart import Wishart, _mvdigamma

__all__: list = []


def _infinite_where(result, mask):
    return pr.where(mask, math.inf, result)


@register_kl(Pareto, Pareto)
def _kl_pareto_pareto(p, q):
    # Gil (2011): infinite where p puts mass below q's scale
    scale_ratio = p.scale / q.scale
    alpha_ratio = q.alpha / p.alpha
    result = q.alpha * scale_ratio.log() - alpha_ratio.log() + alpha_ratio - 1
    return _infinite_where(result, p.scale < q.scale)


@register_kl(Pareto, Exponential)
def _kl_pareto_exponential(p, q):
    scale_rate = p.scale * q.rate
    t1 = (p.alpha / scale_rate).log()
    t2 = p.alpha.reciprocal()
    t3 = p.alpha * scale_rate / (p.alpha - 1)
    return _infinite_where(t1 - t2 + t3 - 1, p.alpha <= 1)


@register_kl(Pareto, Gamma)
def _kl_pareto_gamma(p, q):
    common = p.scale.log() + p.alpha.reciprocal()  # E_p[log x]
    t1 = p.alpha.log() - common
    t2 = q.concentration.lgamma() - q.concentration * q.rate.log()
    t3 = (1 - q.concentration) * common
    t4 = q.rate * p.alpha * p.scale / (p.alpha - 1)
    return _infinite_where(t1 + t2 + t3 + t4 - 1, p.alpha <= 1)


@register_kl(Pareto, Normal)
def _kl_pareto_normal(p, q):
    var_normal = 2 * q.scale.pow(2)
    common = p.scale / (p.alpha - 1)
    t1 = (math.sqrt(2 * math.pi) * q.scale * p.alpha / p.scale).log()
    t2 = p.alpha.reciprocal()
    t3 = p.alpha * common.pow(2) / (p.alpha - 2)
    t4 = (p.alpha * common - q.loc).pow(2)
    return _infinite_where(t1 - t2 + (t3 + t4) / var_normal - 1, p.alpha <= 2)


@register_kl(Uniform, Pareto)
def _kl_uniform_pareto(p, q):
    width = p.high - p.low
    t1 = (q.alpha * q.scale.pow(q.alpha) * width).log()
    t2 = (pr.xlogy(p.high, p.high) - pr.xlogy(p.low, p.low) - width) / width
    return _infinite_where(t2 * (q.alpha + 1) - t1, p.low < q.scale)


def _register_infinite(pairs, param):
    def fun(p, q):
        return pr.full_like(getattr(p, param), math.inf)

    for type_p, type_q in pairs:
        register_kl(type_p, type_q)(fun)


_register_infinite([(Pareto, Beta), (Pareto, ContinuousBernoulli), (Pareto, Uniform)], "scale")
_register_infinite([(Beta, Pareto)], "concentration1")
_register_infinite([(ContinuousBernoulli, Pareto)], "probs")
_register_infinite([(Exponential, Pareto)], "rate")
_register_infinite([(Gamma, Pareto)], "concentration")
_register_infinite([(Gumbel, Pareto), (Laplace, Pareto), (Normal, Pareto)], "loc")


# ---- transformed families: torch's TransformedDistribution pair, with its transform equality ---
@register_kl(InverseGamma, InverseGamma)
def _kl_inverse_gamma_inverse_gamma(p, q):
    if p.event_shape != q.event_shape:
        raise NotImplementedError
    return kl_divergence(p.base_dist, q.base_dist)


def _kl_if_same_parameters(names):
    def fun(p, q):
        for name in names:
            a, b = getattr(p, name), getattr(q, name)
            try:
                same = bool((a == b).all())
            except ValueError:  # shapes that do not broadcast: torch's comparison fails too
                same = False
            if not same:
                raise NotImplementedError
        return kl_divergence(p.base_dist, q.base_dist)

    return fun


register_kl(Weibull, Weibull)(_kl_if_same_parameters(("concentration", "scale")))
register_kl(Kumaraswamy, Kumaraswamy)(_kl_if_same_parameters(("concentration1", "concentration0")))


# ---- ContinuousBernoulli, Gumbel and Poisson against other families (torch's formulas) --------
_EULER = 0.57721566490153286060


def _neg_ce_continuous_bernoulli(mean, q):
    """E_p[log q(x)] for a ContinuousBernoulli q and p on [0, 1] with mean `mean`."""
    return mean * q.logits + (-q.probs).log1p() + q._cont_bern_log_norm()


@register_kl(Beta, ContinuousBernoulli)
def _kl_beta_continuous_bernoulli(p, q):
    return -p.entropy() - _neg_ce_continuous_bernoulli(p.mean, q)


@register_kl(Uniform, ContinuousBernoulli)
def _kl_uniform_continuous_bernoulli(p, q):
    # infinite where p puts mass outside [0, 1] (torch 2.13 also where p.low is 0 or p.high 1,
    # where the integral is finite)
    result = -p.entropy() - _neg_ce_continuous_bernoulli(p.mean, q)
    return _infinite_where(result, (p.high > 1) | (p.low < 0))


@register_kl(ContinuousBernoulli, Exponential)
def _kl_continuous_bernoulli_exponential(p, q):
    return -p.entropy() - q.rate.log() + q.rate * p.mean


@register_kl(ContinuousBernoulli, Normal)
def _kl_continuous_bernoulli_normal(p, q):
    t1 = -p.entropy()
    t2 = 0.5 * (math.log(2.0 * math.pi) + (q.loc / q.scale).pow(2)) + q.scale.log()
    t3 = (p.variance + p.mean.pow(2) - 2.0 * q.loc * p.mean) / (2.0 * q.scale.pow(2))
    return t1 + t2 + t3


@register_kl(ContinuousBernoulli, Uniform)
def _kl_continuous_bernoulli_uniform(p, q):
    # infinite where q does not cover [0, 1] (torch 2.13 also where q.low is 0 or q.high 1)
    result = -p.entropy() + (q.high - q.low).log()
    return _infinite_where(result, (q.low > 0) | (q.high < 1))


@register_kl(Exponential, Gumbel)
def _kl_exponential_gumbel(p, q):
    scale_rate = p.rate * q.scale
    loc_scale = q.loc / q.scale
    t1 = scale_rate.log() - 1
    t2 = loc_scale.exp() * scale_rate / (scale_rate + 1)
    return t1 - loc_scale + t2 + scale_rate.reciprocal()


@register_kl(Gamma, Gumbel)
def _kl_gamma_gumbel(p, q):
    a = p.concentration
    beta_scale = p.rate * q.scale
    loc_scale = q.loc / q.scale
    t1 = (a - 1) * pr.digamma(a) - pr.lgamma(a) - a
    t2 = beta_scale.log() + a / beta_scale
    t3 = loc_scale.exp() * (1 + beta_scale.reciprocal()).pow(-a) - loc_scale
    return t1 + t2 + t3


@register_kl(Gumbel, Normal)
def _kl_gumbel_normal(p, q):
    ratio = p.scale / q.scale
    t1 = (ratio / math.sqrt(2 * math.pi)).log()
    t2 = (math.pi * ratio * 0.5).pow(2) / 3
    t3 = ((p.loc + p.scale * _EULER - q.loc) / q.scale).pow(2) * 0.5
    return -t1 + t2 + t3 - (_EULER + 1)


@register_kl(Normal, Gumbel)
def _kl_normal_gumbel(p, q):
    mean_scale = p.loc / q.scale
    var_ratio = (p.scale / q.scale).pow(2)
    loc_scale = q.loc / q.scale
    t1 = var_ratio.log() * 0.5
    t2 = mean_scale - loc_scale
    t3 = (-mean_scale + 0.5 * var_ratio + loc_scale).exp()
    return -t1 + t2 + t3 - (0.5 * (1 + math.log(2 * math.pi)))


@register_kl(Uniform, Gumbel)
def _kl_uniform_gumbel(p, q):
    common = q.scale / (p.high - p.low)
    high_loc = (p.high - q.loc) / q.scale
    low_loc = (p.low - q.loc) / q.scale
    t1 = common.log() + 0.5 * (high_loc + low_loc)
    t2 = common * ((-high_loc).exp() - (-low_loc).exp())
    return t1 - t2


@register_kl(Bernoulli, Poisson)
def _kl_bernoulli_poisson(p, q):
    return -p.entropy() - (p.probs * q.rate.log() - q.rate)


_register_infinite([(Gumbel, t) for t in (Beta, ContinuousBernoulli, Exponential, Gamma)], "loc")
_register_infinite([(Gumbel, Uniform)], "loc")
_register_infinite([(Exponential, ContinuousBernoulli)], "rate")
_register_infinite([(Gamma, ContinuousBernoulli)], "concentration")
_register_infinite([(Laplace, ContinuousBernoulli), (Normal, ContinuousBernoulli)], "loc")
_register_infinite([(Poisson, Bernoulli), (Poisson, Binomial)], "rate")


@register_kl(Wishart, Wishart)
def _kl_wishart_wishart(p, q):
    """The closed form of torch's exponential-family (Bregman) KL for two Wisharts: with
    M = Sigma_q^-1 Sigma_p, -n_q/2 log det M + n_p/2 (tr M - d) + log Gamma_d(n_q/2) -
    log Gamma_d(n_p/2) + (n_p - n_q)/2 psi_d(n_p/2)."""
    d = p.event_shape[-1]
    lp, lq = p._unbroadcasted_scale_tril, q._unbroadcasted_scale_tril
    shape = tuple(pr.broadcast_shapes(tuple(lp.shape), tuple(lq.shape)))
    half_log_det_m = lp.diagonal(dim1=-2, dim2=-1).log().sum(-1) - lq.diagonal(
        dim1=-2, dim2=-1
    ).log().sum(-1)
    x = pr.linalg.solve_triangular(lq.expand(shape), lp.expand(shape), upper=False)
    trace_m = x.pow(2).sum((-2, -1))
    n_p, n_q = p.df, q.df
    return (
        -n_q * half_log_det_m
        + n_p / 2 * (trace_m - d)
        + pr.mvlgamma(n_q / 2, p=d)
        - pr.mvlgamma(n_p / 2, p=d)
        + (n_p - n_q) / 2 * _mvdigamma(n_p / 2, p=d)
    )
