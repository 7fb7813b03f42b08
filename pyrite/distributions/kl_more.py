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
from .uniform import Uniform
from .weibull import Weibull

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
