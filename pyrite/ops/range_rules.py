"""The range rules of integer ops (ops/ranges.py says what a range is and how one is kept): each
maps its operands' (lo, hi) to the exact range of the mathematical result, which `ranges.settle`
drops where it leaves the result's dtype. The elementwise ops (ops/elementwise.py) and the casts
(ops/casts.py) call the `after_*` functions once their kernel has run."""

from __future__ import annotations

import numbers

from .ranges import FRESH, const, hull, known, known_or_any, settle


def _same(r):
    return r


# ---- binary and unary rules -------------------------------------------------------------------
def _add(a, b):
    return (a[0] + b[0], a[1] + b[1])


def _sub(a, b):
    return (a[0] - b[1], a[1] - b[0])


def _mul(a, b):
    c = (a[0] * b[0], a[0] * b[1], a[1] * b[0], a[1] * b[1])
    return (min(c), max(c))


def _corners(op):
    """A rule for an op monotone in each operand where the divisor keeps its sign."""

    def rule(a, b):
        if b[0] <= 0 <= b[1]:
            return None  # (a zero divisor raises first; a sign change breaks monotony)
        c = [op(x, y) for x in a[:2] for y in b[:2]]
        return (min(c), max(c))

    return rule


def _trunc_div(x, y):
    q = abs(x) // abs(y)
    return q if (x < 0) == (y < 0) else -q


def _remainder(a, b):
    """Python's %: the divisor's sign, |r| < |b|."""
    if b[0] <= 0 <= b[1]:
        return None
    if b[0] == b[1]:
        s = b[0]
        if a[0] // s == a[1] // s:  # one period: % is x - s·q with q fixed, increasing in x
            return (a[0] % s, a[1] % s)
    if b[0] > 0:
        return (0, min(b[1] - 1, a[1])) if a[0] >= 0 else (0, b[1] - 1)
    return (max(b[0] + 1, a[0]), 0) if a[1] <= 0 else (b[0] + 1, 0)


def _fmod(a, b):
    """C's fmod: the dividend's sign, |r| < |b|."""
    if b[0] <= 0 <= b[1]:
        return None
    m = max(abs(b[0]), abs(b[1]))
    if b[0] == b[1] and (a[0] >= 0 or a[1] <= 0):
        q0, q1 = _trunc_div(a[0], m), _trunc_div(a[1], m)
        if q0 == q1:  # one period on one side of 0: x - m·q, increasing in x
            return (a[0] - q0 * m, a[1] - q1 * m)
    lo = 0 if a[0] >= 0 else max(a[0], 1 - m)
    hi = 0 if a[1] <= 0 else min(a[1], m - 1)
    return (lo, hi)


def _maximum(a, b):
    return (max(a[0], b[0]), max(a[1], b[1]))


def _minimum(a, b):
    return (min(a[0], b[0]), min(a[1], b[1]))


def _bit_and(a, b):
    if a[0] >= 0 and b[0] >= 0:
        return (0, min(a[1], b[1]))
    return None


def _bit_or(a, b):
    if a[0] >= 0 and b[0] >= 0:
        return (0, (1 << max(a[1], b[1]).bit_length()) - 1)
    return None


BINARY = {
    "add": _add,
    "sub": _sub,
    "mul": _mul,
    "floor_divide": _corners(lambda x, y: x // y),
    "div_floor": _corners(lambda x, y: x // y),
    "div_trunc": _corners(_trunc_div),
    "remainder": _remainder,
    "fmod": _fmod,
    "maximum": _maximum,
    "minimum": _minimum,
    "bitwise_and": _bit_and,
    "bitwise_or": _bit_or,
    "bitwise_xor": _bit_or,
}


def _neg(a):
    return (-a[1], -a[0])


def _abs(a):
    if a[0] >= 0:
        return a
    if a[1] <= 0:
        return (-a[1], -a[0])
    return (0, max(-a[0], a[1]))


def _square(a):
    m = _abs(a)
    return (m[0] * m[0], m[1] * m[1])


UNARY = {
    "neg": _neg,
    "abs": _abs,
    "square": _square,
    "sign": lambda a: ((a[0] > 0) - (a[0] < 0), (a[1] > 0) - (a[1] < 0)),
    "relu": lambda a: (max(a[0], 0), max(a[1], 0)),
    "bitwise_not": lambda a: (-a[1] - 1, -a[0] - 1),
    "floor": _same,
    "ceil": _same,
    "round": _same,
    "trunc": _same,
}


def capture(out, *operands):
    """Before an op writes into a given `out` (in place: an operand may be out itself), what
    its rule needs afterwards: out's handle and its tensor operands' (`after_binary`'s `pre`)."""
    # (a Python number skips hasattr, whose miss costs ~0.4 µs: x.add_(1.0))
    return (
        known(out),
        *(
            known(x) if type(x) not in _NUMBERS and hasattr(x, "_storage") else None
            for x in operands
        ),
    )


_NUMBERS = frozenset((int, float, bool))


def _operand(x, rt, k=FRESH):
    """The handle of an operand of an integer op computing in `rt`: a Python int (wrapped to a
    small int as the op wraps it), or an int tensor's range (`k`: as captured before the op ran;
    the whole int32 range where not known: some rules bound their result anyway)."""
    if isinstance(x, numbers.Integral):
        v = int(x)
        if rt.is_small_int:
            from ..dtypes import wrap_int

            v = wrap_int(v, rt)
        return const(v, v)
    if not hasattr(x, "_storage") or x.dtype.kind != "i":
        return None  # (a float or bool operand)
    return known_or_any(x) if k is FRESH else known_or_any(x, k)


def _fit(rule, rt):
    """`rule` over operands first brought into `rt` (a 0-d tensor of a wider int type is cast
    to a small int result type, wrapping: out of its range it may be anything in it)."""
    if not rt.is_small_int:
        return rule
    hit = _fitted.get((rule, rt))
    if hit is None:
        hit = _fitted[(rule, rt)] = _fit_small(rule, rt)
    return hit


_fitted: dict = {}


def _fit_small(rule, rt):
    lo, hi = rt.min, rt.max

    def fitted(*ranges):
        return rule(*((r if lo <= r[0] and r[1] <= hi else (lo, hi)) for r in ranges))

    return fitted


def after_binary(name, a, b, out, pre=None):
    """`out = a <name> b` just ran (an int result): note its range where the rule knows it.
    `pre`: `capture(out, a, b)` from before, where `out` was given."""
    rule = BINARY.get(name)
    if rule is None:
        return
    rt = out.dtype
    before, ka, kb = (FRESH, FRESH, FRESH) if pre is None else pre
    ha, hb = _operand(a, rt, ka), _operand(b, rt, kb)
    if ha is None or hb is None:
        return
    settle(out, _fit(rule, rt), ha, hb, before=before)


def after_unary(name, x, out, pre=None):
    rule = UNARY.get(name)
    if rule is None or x.dtype.kind != "i":
        return
    before, kx = (FRESH, known(x)) if pre is None else pre
    settle(out, _fit(rule, out.dtype), kx, before=before)


def _bit(*_):
    return (0, 1)


def after_cast(x, out, before=FRESH, kx=FRESH):
    """`out` holds x's values cast to out's int dtype (wrapped where they leave it); `kx`: x's
    handle taken before the kernel ran. A bool source gives 0 and 1 whatever its words hold (the
    cast loads a bool as `word != 0`: kernels/common.load), so `mask.int()` is bounded."""
    if x.dtype.is_bool:
        settle(out, _bit, before=before)
        return
    if x.dtype.kind != "i":
        return
    rt = out.dtype

    def cast(r):
        return r if rt.min <= r[0] and r[1] <= rt.max else (rt.min, rt.max)

    settle(out, cast, known(x) if kx is FRESH else kx, before=before)


def after_where(out, *operands):
    """`out` holds, per element, one of `operands` (tensors or Python ints)."""
    hs = [_operand(x, out.dtype) for x in operands]
    if any(h is None for h in hs):
        return
    settle(out, _fit(hull, out.dtype), *hs)


def after_sum(x, out, n: int, before=FRESH):
    """`out` holds sums of `n` elements of the int tensor `x` each (a reduction over n)."""
    if x.dtype.kind == "i":
        settle(out, lambda a: (n * a[0], n * a[1]), known(x), before=before)


def after_cumsum(x, out, n: int):
    """`out` holds the prefix sums of `x` along a dim of `n` elements (1 to n terms each)."""
    if x.dtype.kind == "i" and n:
        settle(out, lambda a: (min(a[0], n * a[0]), max(a[1], n * a[1])), known(x))


def sum_fits(x, n: int) -> bool:
    """Whether a sum of `n` elements of the int tensor `x` is known to fit in int32 without
    a readback (the overflow check reads one back otherwise): every element's magnitude is at
    most (2^31 - 1) // n. Under pr.compile a need its replays meet too."""
    if x.dtype.kind != "i" or n <= 0:
        return False
    from .ranges import I32_MAX, within

    b = I32_MAX // n
    return within(x, -b, b)
