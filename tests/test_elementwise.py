"""Parity of every elementwise op against torch CPU in float64 (or numpy float64).

Inputs: awkward shapes (1, 7, 13, 257, 2-D, broadcast (3,1,5) vs (4,5)), laid out contiguous,
transposed, strided, expanded and with negative steps; domains suited to each op; special values
(±0, ±inf, NaN, large |x|). Tolerances come from WGSL's accuracy table ("Floating Point Accuracy",
WGSL spec §15.7) or from the helper's measured bound in kernels/common.py:
  + - * (correctly rounded), / and sqrt 2.5 ULP, inverseSqrt 2 ULP  -> 4 ULP
  exp, exp2: 3 + 2·|x| ULP                                          -> (4 + 2·max|x|) ULP
  log, log2: 3 ULP outside [0.5, 2], 2^-21 absolute inside           -> 4 ULP + 2^-21 abs
  sin, cos: 2^-11 absolute on [-π, π]                                -> 2^-11 abs
  tanh (expm1-based), log1p, expm1 (series near 0): measured <= 8 ULP on lavapipe -> 16 ULP
  erf: measured 1.02 ULP, 6.1e-8 absolute on 2M points of [-7, 7]    -> 2 ULP + 2^-23 abs
  gelu: erfc-based, measured 3.8e-7 absolute                          -> 2^-21 abs + 8 ULP
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import pyrite as pr
from pyrite import backend
from tests.optable import EPS32, OpInfo, Sample, assert_close, check_row, has_f16

ULP = 2 * EPS32  # one unit in the last place of f32, relative


def tol(ulps=4, atol=0.0):
    return lambda inputs, expected: (atol + 2.0**-126, ulps * ULP)


def exp_tol(extra=0, cap=104.0):
    """WGSL exp: 3 + 2·|x| ULP; ops built on it add `extra` ULP (|x| capped at `cap`)."""

    def f(inputs, expected):
        big = max(float(np.max(np.abs(a[np.isfinite(a)]), initial=0.0)) for a in inputs)
        big = min(big, cap)  # past 104 exp(x) is inf or 0 in f32
        # results below 2^-126 may be flushed to zero (WGSL allows it), scaled by up to |x|
        return (1 + big) * 2.0**-126, (4 + extra + 2 * big) * ULP

    return f


def T(fn):
    """A torch function turned into a float64 numpy reference."""

    def ref(*arrays, **kw):
        ts = [torch.from_numpy(np.asarray(a)) for a in arrays]
        r = fn(*ts, **kw).numpy()
        # the exact value rounded once to f32: what a correct kernel stores (overflow -> inf)
        with np.errstate(over="ignore"):
            return r.astype(np.float32).astype(np.float64) if r.dtype.kind == "f" else r

    return ref


def uni(lo, hi, specials=(), shapes=((1,), (7,), (13,), (257,), (13, 17)), layouts="ctse", kw=None):
    out = []
    for shape in shapes:
        for lay in layouts:
            if lay in "te" and len(shape) < 2:
                continue

            def make(rng, shape=shape, lay=lay):
                a = rng.uniform(lo, hi, size=shape)
                if lay == "e":
                    a = np.broadcast_to(a[:1], shape).copy()
                return [a]

            out.append(Sample(make, kwargs=dict(kw or {}), layout=lay, name=f"{shape}{lay}"))
    if specials:
        sp = np.array(specials, dtype=np.float64)
        out.append(Sample(lambda rng, sp=sp: [sp.copy()], kwargs=dict(kw or {}), name="specials"))
    return out


SPECIAL = (0.0, -0.0, np.inf, -np.inf, np.nan, 1e30, -1e30, 88.0, -88.0, 100.0, -100.0)
SP_POS = (0.0, np.inf, np.nan, 1e30, 1e-30, 1.0)


def _gelu_tanh64(x):
    # x·sigmoid(2y) in float64, stable for large negative x (torch's 1 + tanh(y) cancels there)
    y = math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)
    with np.errstate(over="ignore"):
        return x / (1 + np.exp(-2 * y))


def _gelu_tol(inputs, expected):
    return 2.0**-21, 8 * ULP


UNARY_ROWS = [
    OpInfo("neg", lambda x: -x, T(torch.neg), uni(-5, 5, SPECIAL), tol(0)),
    OpInfo("abs", lambda x: x.abs(), T(torch.abs), uni(-5, 5, SPECIAL), tol(0)),
    OpInfo("exp", lambda x: x.exp(), T(torch.exp), uni(-10, 10, SPECIAL), exp_tol()),
    OpInfo("exp2", lambda x: pr.exp2(x), T(torch.exp2), uni(-10, 10, SPECIAL), exp_tol()),
    OpInfo("log", lambda x: x.log(), T(torch.log), uni(1e-3, 50, SP_POS), tol(4, 2.0**-21)),
    OpInfo("log2", lambda x: pr.log2(x), T(torch.log2), uni(1e-3, 50, SP_POS), tol(4, 2.0**-21)),
    OpInfo("log10", lambda x: pr.log10(x), T(torch.log10), uni(1e-3, 50, SP_POS), tol(6, 2.0**-21)),
    OpInfo(
        "log1p",
        lambda x: x.log1p(),
        T(torch.log1p),
        uni(-0.99, 5, (0.0, -0.0, 1e-30, 6e-8, -6e-8, 1e-5, np.inf, np.nan, -1.0)),
        tol(16),
    ),
    OpInfo(
        "expm1",
        lambda x: x.expm1(),
        T(torch.expm1),
        uni(
            -3,
            3,
            (0.0, -0.0, 1e-30, 1e-7, -1.1e-5, 0.49, -0.51, 88.0, -100.0, np.inf, -np.inf, np.nan),
        ),
        exp_tol(16),
    ),
    OpInfo("sqrt", lambda x: x.sqrt(), T(torch.sqrt), uni(0, 100, SP_POS + (-1.0,)), tol(4)),
    OpInfo(
        "rsqrt", lambda x: x.rsqrt(), T(torch.rsqrt), uni(1e-3, 100, (np.inf, 1.0, 4.0)), tol(4)
    ),
    OpInfo("sin", lambda x: x.sin(), T(torch.sin), uni(-math.pi, math.pi), tol(0, 2.0**-11)),
    OpInfo("cos", lambda x: x.cos(), T(torch.cos), uni(-math.pi, math.pi), tol(0, 2.0**-11)),
    # tan = sin/cos: the 2^-11 of each grows by 1/cos² <= 3.4 on [-1, 1]
    OpInfo("tan", lambda x: pr.tan(x), T(torch.tan), uni(-1, 1), tol(4, 4 * 2.0**-11)),
    OpInfo(
        "tanh",
        lambda x: x.tanh(),
        T(torch.tanh),
        uni(-10, 10, SPECIAL + (1e-3, -1e-3, 1e-6, 50.0, -50.0)),
        tol(16),
    ),
    OpInfo("sigmoid", lambda x: x.sigmoid(), T(torch.sigmoid), uni(-20, 20, SPECIAL), exp_tol(4)),
    OpInfo("relu", lambda x: x.relu(), T(torch.relu), uni(-5, 5, SPECIAL), tol(0)),
    OpInfo(
        "gelu",
        lambda x: pr.gelu(x),
        T(torch.nn.functional.gelu),
        uni(-8, 8, SPECIAL + (-5.0, -7.0, 3.0)),
        _gelu_tol,
    ),
    OpInfo(
        "gelu_tanh",
        lambda x: pr.gelu(x, approximate="tanh"),
        _gelu_tanh64,
        uni(-8, 8, SPECIAL + (-5.0, -7.0, 3.0)),
        _gelu_tol,
    ),
    OpInfo(
        "silu", lambda x: pr.silu(x), T(torch.nn.functional.silu), uni(-20, 20, SPECIAL), exp_tol(4)
    ),
    OpInfo(
        "softplus",
        lambda x: pr.softplus(x),
        T(torch.nn.functional.softplus),
        uni(-30, 30, SPECIAL),
        lambda i, e: (2.0**-21, (24 + 60) * ULP),
    ),
    OpInfo("erf", lambda x: pr.erf(x), T(torch.erf), uni(-7, 7, SPECIAL), tol(2, 2.0**-23)),
    OpInfo("sign", lambda x: x.sign(), T(torch.sign), uni(-5, 5, SPECIAL), tol(0)),
    OpInfo(
        "floor", lambda x: x.floor(), T(torch.floor), uni(-50, 50, SPECIAL + (-0.5, 2.5)), tol(0)
    ),
    OpInfo("ceil", lambda x: x.ceil(), T(torch.ceil), uni(-50, 50, SPECIAL), tol(0)),
    OpInfo(
        "round",
        lambda x: x.round(),
        T(torch.round),
        uni(-50, 50, SPECIAL + (0.5, 1.5, 2.5, -0.5, -2.5, 3.5)),
        tol(0),
    ),
    OpInfo("trunc", lambda x: x.trunc(), T(torch.trunc), uni(-50, 50, SPECIAL), tol(0)),
    OpInfo("isnan", lambda x: x.isnan(), T(torch.isnan), uni(-5, 5, SPECIAL)),
    OpInfo("isinf", lambda x: x.isinf(), T(torch.isinf), uni(-5, 5, SPECIAL)),
    OpInfo("isfinite", lambda x: x.isfinite(), T(torch.isfinite), uni(-5, 5, SPECIAL)),
    OpInfo(
        "reciprocal",
        lambda x: x.reciprocal(),
        T(torch.reciprocal),
        uni(0.5, 5, (np.inf, -0.0)),
        tol(4),
    ),
    OpInfo("square", lambda x: x.square(), T(torch.square), uni(-5, 5, SPECIAL), tol(1)),
]


@pytest.mark.parametrize("row", UNARY_ROWS, ids=lambda r: r.name)
def test_unary(row, rng):
    check_row(row, rng)


def T16(fn):
    """Reference rounded once to float16, the storage the result lands in."""

    def ref(*arrays):
        with np.errstate(over="ignore"):
            return (
                fn(*[torch.from_numpy(a) for a in arrays])
                .numpy()
                .astype(np.float16)
                .astype(np.float64)
            )

    return ref


F16_ROWS = [
    OpInfo(
        "exp", lambda x: x.exp(), T16(torch.exp), uni(-4, 4, (0.0, np.inf, -np.inf, np.nan, 12.0))
    ),
    OpInfo("tanh", lambda x: x.tanh(), T16(torch.tanh), uni(-4, 4, (np.nan, np.inf, 1e-3))),
    OpInfo("gelu", lambda x: pr.gelu(x), T16(torch.nn.functional.gelu), uni(-4, 4)),
    OpInfo("relu", lambda x: x.relu(), T16(torch.relu), uni(-4, 4, (np.nan, -np.inf))),
    OpInfo("sigmoid", lambda x: x.sigmoid(), T16(torch.sigmoid), uni(-9, 9)),
    OpInfo("round", lambda x: x.round(), T16(torch.round), uni(-9, 9, (0.5, 1.5, -2.5))),
]


@pytest.mark.parametrize("row", F16_ROWS, ids=lambda r: r.name)
def test_unary_float16(row, rng):
    """f16 storage, f32 compute: within one f16 rounding (check_row's f16 floor) of the truth."""
    check_row(row, rng, "float16")


def test_erf_dense_against_math_erf():
    """The claim in kernels/common.py: <= 2 ULP and 2^-23 absolute over [-7, 7], measured."""
    x = np.linspace(-7, 7, 200_001).astype(np.float32)
    got = pr.tensor(x).erf().numpy().astype(np.float64)
    want = np.array([math.erf(float(v)) for v in x])
    assert_close(got, want, 2.0**-23, 2 * ULP, "erf vs math.erf")


def test_gelu_tail_is_relatively_accurate():
    """gelu for x in [-9, -3]: relative error small (the 1 + erf form had 100 %)."""
    x = np.linspace(-9, -3, 1001).astype(np.float32)
    got = pr.gelu(pr.tensor(x)).numpy().astype(np.float64)
    want = np.array([0.5 * float(v) * math.erfc(-float(v) / math.sqrt(2)) for v in x])
    # erfc's exp(-a²) sees its argument's rounding times a² (<= 41): 1e-4 relative covers it
    assert_close(got, want, 0.0, 1e-4, "gelu tail")


def test_gelu_and_its_gradient_hold_over_a_dense_sweep():
    """gelu's branch-free normal CDF (kernels/common.py p_gelu_cdf) on 400,001 points of
    [-14, 14] plus random ones against float64 (2^-21 abs + 8 ULP, the row tests' bound), and the
    fused gradient x0·(Φ(x) + x·φ(x)) through autograd."""
    rng = np.random.default_rng()
    x = np.concatenate([np.linspace(-14, 14, 400_001), rng.standard_normal(9_973) * 4])
    x = x.astype(np.float32)
    xd = x.astype(np.float64)
    cdf = np.array([0.5 * math.erfc(-v / math.sqrt(2)) for v in xd])
    got = pr.gelu(pr.tensor(x)).numpy().astype(np.float64)
    assert_close(got, xd * cdf, 2.0**-21, 8 * ULP, "gelu dense")
    g = rng.standard_normal(x.size).astype(np.float32)
    t = pr.tensor(x, requires_grad=True)
    pr.gelu(t).backward(pr.tensor(g))
    want = g * (cdf + xd * np.exp(-0.5 * xd * xd) / math.sqrt(2 * math.pi))
    # the derivative's φ term through WGSL's exp (3 + 2|x²/2| ULP where it matters, |x| < 6)
    assert_close(t.grad.numpy().astype(np.float64), want, 2.0**-20, 64 * ULP, "gelu grad")


# ---- binary --------------------------------------------------------------------------------
BIN_SHAPES = [
    ((1,), (1,)),
    ((7,), (7,)),
    ((257,), (257,)),
    ((13, 17), (13, 17)),
    ((3, 1, 5), (4, 5)),
    ((4, 5), (3, 1, 5)),
    ((13,), ()),
    ((), (7,)),
    ((17, 1), (1, 13)),
]


def bin_samples(lo, hi, lo2=None, hi2=None, ints=False, layouts=("cc", "ts", "st", "ec")):
    lo2 = lo if lo2 is None else lo2
    hi2 = hi if hi2 is None else hi2
    out = []
    for sa, sb in BIN_SHAPES:
        for lay in layouts:
            if ("t" in lay or "e" in lay) and (len(sa) < 2 or len(sb) < 2):
                continue

            def make(rng, sa=sa, sb=sb, lay=lay):
                if ints:
                    a = rng.integers(lo, hi, size=sa).astype(np.int32)
                    b = rng.integers(lo2, hi2, size=sb).astype(np.int32)
                else:
                    a, b = rng.uniform(lo, hi, size=sa), rng.uniform(lo2, hi2, size=sb)
                if lay[0] == "e" and a.ndim:
                    a = np.broadcast_to(a[:1], sa).copy()
                return [a, b]

            out.append(Sample(make, layout=lay, name=f"{sa}{sb}{lay}"))
    return out


def _div_ints_nonzero(rng, shape):
    b = rng.integers(-9, 10, size=shape).astype(np.int32)
    b[b == 0] = 3
    return b


def int_div_samples():
    out = []
    for sa, sb in BIN_SHAPES:

        def make(rng, sa=sa, sb=sb):
            return [rng.integers(-50, 51, size=sa).astype(np.int32), _div_ints_nonzero(rng, sb)]

        out.append(Sample(make, name=f"{sa}{sb}"))
    edge = np.array([7, -7, 7, -7, 0, -1, 1, 2147483647, -2147483647, 5, -5], np.int32)
    den = np.array([2, 2, -2, -2, 3, 3, -3, 2, 3, 5, 5], np.int32)
    out.append(Sample(lambda rng: [edge.copy(), den.copy()], name="edges"))
    return out


def Tb(fn):
    def ref(a, b):
        ta = torch.from_numpy(np.asarray(a).astype(np.int64) if a.dtype.kind == "i" else a)
        tb = torch.from_numpy(np.asarray(b).astype(np.int64) if b.dtype.kind == "i" else b)
        r = fn(ta, tb).numpy()
        if r.dtype.kind == "f":
            with np.errstate(over="ignore"):
                return r.astype(np.float32).astype(np.float64)
        return r.astype(np.int32) if r.dtype == np.int64 else r

    return ref


BINARY_ROWS = [
    OpInfo("add", lambda a, b: a + b, Tb(torch.add), bin_samples(-5, 5), tol(1)),
    OpInfo("sub", lambda a, b: a - b, Tb(torch.sub), bin_samples(-5, 5), tol(1)),
    OpInfo("mul", lambda a, b: a * b, Tb(torch.mul), bin_samples(-5, 5), tol(1)),
    OpInfo("div", lambda a, b: a / b, Tb(torch.div), bin_samples(-5, 5, 0.5, 5), tol(4)),
    # floor(a/b): exact unless a/b rounds across an integer (not met by these draws)
    OpInfo(
        "floordiv",
        lambda a, b: a // b,
        Tb(torch.floor_divide),
        bin_samples(-20, 20, 0.7, 3),
        tol(0),
    ),
    OpInfo(
        "remainder",
        lambda a, b: a % b,
        Tb(torch.remainder),
        bin_samples(-20, 20, 0.7, 3),
        lambda i, e: (40 * EPS32 * 4, 0),
    ),
    OpInfo(
        "pow",
        lambda a, b: a**b,
        Tb(torch.pow),
        bin_samples(0.1, 4, -3, 3),
        lambda i, e: (2.0**-126, (4 + 2 * 3 * 2.1) * ULP * 4),
    ),
    OpInfo("maximum", pr.maximum, Tb(torch.maximum), bin_samples(-5, 5), tol(0)),
    OpInfo("minimum", pr.minimum, Tb(torch.minimum), bin_samples(-5, 5), tol(0)),
    # WGSL's atan2 bound is 4096 ULP (spec §15.7.4); lavapipe measured ~20 ULP
    OpInfo("atan2", pr.atan2, Tb(torch.atan2), bin_samples(-5, 5), tol(4096)),
    OpInfo("eq", lambda a, b: a == b, Tb(torch.eq), bin_samples(-2, 2, ints=True)),
    OpInfo("ne", lambda a, b: a != b, Tb(torch.ne), bin_samples(-2, 2, ints=True)),
    OpInfo("lt", lambda a, b: a < b, Tb(torch.lt), bin_samples(-5, 5)),
    OpInfo("le", lambda a, b: a <= b, Tb(torch.le), bin_samples(-2, 2, ints=True)),
    OpInfo("gt", lambda a, b: a > b, Tb(torch.gt), bin_samples(-5, 5)),
    OpInfo("ge", lambda a, b: a >= b, Tb(torch.ge), bin_samples(-2, 2, ints=True)),
    OpInfo("and_i", lambda a, b: a & b, Tb(torch.bitwise_and), bin_samples(-100, 100, ints=True)),
    OpInfo("or_i", lambda a, b: a | b, Tb(torch.bitwise_or), bin_samples(-100, 100, ints=True)),
    OpInfo("xor_i", lambda a, b: a ^ b, Tb(torch.bitwise_xor), bin_samples(-100, 100, ints=True)),
    OpInfo("logical_and", pr.logical_and, Tb(torch.logical_and), bin_samples(-1, 2, ints=True)),
    OpInfo("logical_or", pr.logical_or, Tb(torch.logical_or), bin_samples(-1, 2, ints=True)),
    OpInfo("logical_xor", pr.logical_xor, Tb(torch.logical_xor), bin_samples(-1, 2, ints=True)),
    OpInfo("int_add", lambda a, b: a + b, Tb(torch.add), bin_samples(-1000, 1000, ints=True)),
    OpInfo("int_mul", lambda a, b: a * b, Tb(torch.mul), bin_samples(-1000, 1000, ints=True)),
    OpInfo("int_floordiv", lambda a, b: a // b, Tb(torch.floor_divide), int_div_samples()),
    OpInfo("int_remainder", lambda a, b: a % b, Tb(torch.remainder), int_div_samples()),
    OpInfo("int_div", lambda a, b: a / b, Tb(torch.div), int_div_samples(), tol(4)),
    OpInfo("int_pow", lambda a, b: a**b, Tb(torch.pow), bin_samples(-5, 6, 0, 6, ints=True)),
    OpInfo("int_max", pr.maximum, Tb(torch.maximum), bin_samples(-9, 9, ints=True)),
]


@pytest.mark.parametrize("row", BINARY_ROWS, ids=lambda r: r.name)
def test_binary(row, rng):
    check_row(row, rng)


def test_float_specials_binary():
    a = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, np.nan, 3.0, -np.inf], np.float32)
    b = np.array([-0.0, 0.0, 1.0, np.inf, 2.0, np.nan, np.nan, np.inf, -np.inf], np.float32)
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    pa, pb = pr.tensor(a), pr.tensor(b)
    for name in ("add", "sub", "mul", "maximum", "minimum", "eq", "lt", "ge"):
        got = getattr(pr, name)(pa, pb).numpy()
        want = getattr(torch, name)(ta, tb).numpy()
        np.testing.assert_array_equal(got, want, err_msg=name)
    np.testing.assert_array_equal((pa / pb).numpy(), (ta / tb).numpy())


def test_pow_specials():
    a = np.array(
        [np.nan, np.nan, 1.0, np.nan, -2.0, -2.0, 0.0, 0.0, np.inf, -np.inf, 2.0, -8.0], np.float32
    )
    b = np.array(
        [3.0, 0.0, np.nan, np.nan, 3.0, 0.5, -1.0, 2.5, -1.0, 3.0, np.inf, 1 / 3], np.float32
    )
    want = torch.pow(torch.from_numpy(a), torch.from_numpy(b)).numpy()
    got = (pr.tensor(a) ** pr.tensor(b)).numpy()
    assert_close(got.astype(np.float64), want.astype(np.float64), 0, 8 * ULP, "pow specials")
    for e in (3.0, 0.0, -1.0):
        assert_close(
            (pr.tensor(a) ** e).numpy().astype(np.float64),
            (torch.from_numpy(a) ** e).double().numpy(),
            0,
            8 * ULP,
            f"pow {e}",
        )


def test_bool_ops():
    rng = np.random.default_rng(1)
    a, b = rng.random(37) < 0.5, rng.random(37) < 0.5
    pa, pb, ta, tb = pr.tensor(a), pr.tensor(b), torch.from_numpy(a), torch.from_numpy(b)
    cases = [
        (lambda x, y: x & y, None),
        (lambda x, y: x | y, None),
        (lambda x, y: x ^ y, None),
        (lambda x, y: ~x, None),
        (lambda x, y: x + y, None),
        (lambda x, y: x == y, None),
        (lambda x, y: x * y, None),
        (pr.logical_and, torch.logical_and),
        (lambda x, y: pr.logical_not(x), lambda x, y: torch.logical_not(x)),
    ]
    for fn, tfn in cases:
        got, want = fn(pa, pb), (tfn or fn)(ta, tb)
        assert got.dtype is pr.bool
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    i = np.arange(-5, 6, dtype=np.int32)
    np.testing.assert_array_equal((~pr.tensor(i)).numpy(), ~i)


# ---- scalars on either side, and result dtypes ----------------------------------------------
SCALAR_OPS = ["add", "sub", "mul", "div", "floor_divide", "remainder", "pow", "eq", "lt", "ge"]
_PYOP = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "floor_divide": lambda a, b: a // b,
    "remainder": lambda a, b: a % b,
    "pow": lambda a, b: a**b,
    "eq": lambda a, b: a == b,
    "lt": lambda a, b: a < b,
    "ge": lambda a, b: a >= b,
}

_TD = {"float32": torch.float32, "float16": torch.float16, "int32": torch.int32, "bool": torch.bool}


def _torch_dt(d):
    name = str(d).replace("torch.", "")
    return {"int64": "int32"}.get(name, name)


@pytest.mark.parametrize("op", SCALAR_OPS)
@pytest.mark.parametrize("dtype", ["float32", "int32", "float16", "bool"])
@pytest.mark.parametrize("scalar", [3, 2.5, True, -2])
@pytest.mark.parametrize("side", ["left", "right"])
def test_scalar_operands(op, dtype, scalar, side, rng):
    if dtype == "bool":
        # no False on the left of // and %: torch raises ZeroDivisionError for an integer x // 0,
        # which a GPU kernel cannot (pyrite gives 0)
        a = rng.random(13) < (0.5 if op not in ("floor_divide", "remainder") else 2)
    elif dtype == "int32":
        a = rng.integers(1, 9, 13).astype(np.int32)
    else:
        a = rng.uniform(0.5, 4, 13).astype(dtype)
    t = torch.from_numpy(a)
    p = pr.tensor(a)

    def call(tensor):
        return _PYOP[op](scalar, tensor) if side == "left" else _PYOP[op](tensor, scalar)

    try:
        want = call(t)
    except (RuntimeError, TypeError):
        with pytest.raises((TypeError, RuntimeError, ValueError)):
            call(p)
        return
    got = call(p)
    assert got.dtype.name == _torch_dt(want.dtype), (
        f"{op} {dtype} {scalar!r}: {got.dtype} vs {want.dtype}"
    )
    w = want.double().numpy() if want.dtype.is_floating_point else want.numpy()
    g = got.numpy()
    if want.dtype.is_floating_point:
        eps = 2.0**-10 if want.dtype == torch.float16 else 2.0**-20
        assert_close(g.astype(np.float64), w, eps, 8 * eps, f"{op} {dtype} {scalar!r} {side}")
    else:
        np.testing.assert_array_equal(g, w.astype(g.dtype), err_msg=f"{op} {dtype} {scalar!r}")


PROMOTION_CASES = [
    (lambda m: m.ones(3, dtype=m.int32) + 2.5, "int tensor + float scalar"),
    (lambda m: m.ones(3, dtype=m.float16) + 2.5, "f16 tensor + float scalar"),
    (lambda m: m.ones(3, dtype=m.int32) + m.tensor(2.5), "int + 0-d float tensor"),
    (lambda m: m.ones(3, dtype=m.float16) + m.tensor(2.5), "f16 + 0-d f32 tensor"),
    (lambda m: m.ones(3, dtype=m.float16) + m.ones(3), "f16 + f32 tensor"),
    (lambda m: m.ones(3, dtype=m.bool) + m.ones(3, dtype=m.bool), "bool + bool"),
    (lambda m: m.ones(3, dtype=m.int32) / m.ones(3, dtype=m.int32), "int / int"),
    (lambda m: m.ones(3, dtype=m.bool) * 3, "bool * int scalar"),
    (lambda m: m.ones(3, dtype=m.bool) + m.tensor(3), "bool + 0-d int tensor"),
    (lambda m: m.ones(3, dtype=m.int32) * True, "int * bool scalar"),
    (lambda m: m.tensor(2) * m.ones(3, dtype=m.float16), "0-d int * f16"),
    (lambda m: m.tensor(2.0) * m.tensor(3), "0-d f32 * 0-d int"),
    (lambda m: m.ones(3, dtype=m.int32) // 2, "int // int scalar"),
    (lambda m: m.ones(3, dtype=m.int32) ** 2, "int ** int"),
    (lambda m: m.ones(3, dtype=m.int32) ** 0.5, "int ** float"),
    (lambda m: m.ones(3, dtype=m.int32).sqrt(), "sqrt(int)"),
    (
        lambda m: m.ones(3, dtype=m.bool).neg() if m is pr else m.ones(3, dtype=m.int64).neg(),
        "skip",
    ),
    (lambda m: m.where(m.ones(3, dtype=m.bool), 1.0, 0), "where scalars"),
    (
        lambda m: m.where(m.ones(3, dtype=m.bool), m.ones(3, dtype=m.int32), 2.5),
        "where int tensor, float scalar",
    ),
    (lambda m: m.ones(3, dtype=m.int32).clamp(0.5, 2), "clamp int with float"),
]


@pytest.mark.parametrize("case", PROMOTION_CASES, ids=lambda c: c[1])
def test_promotion_matches_torch(case):
    fn, name = case
    if name == "skip":
        return
    want = fn(torch)
    got = fn(pr)
    assert got.dtype.name == _torch_dt(want.dtype), f"{name}: {got.dtype} vs torch {want.dtype}"
    np.testing.assert_allclose(got.numpy().astype(np.float64), want.double().numpy(), rtol=1e-3)


# ---- where, clamp, lerp, nan_to_num ---------------------------------------------------------
def test_where(rng):
    c = rng.random((3, 1, 5)) < 0.5
    a = rng.standard_normal((4, 5)).astype(np.float32)
    b = rng.standard_normal((5,)).astype(np.float32)
    got = pr.where(pr.tensor(c), pr.tensor(a), pr.tensor(b)).numpy()
    np.testing.assert_array_equal(got, np.where(c, a, b))
    got = pr.where(pr.tensor(c), pr.tensor(a), 7.5).numpy()
    np.testing.assert_array_equal(got, np.where(c, a, np.float32(7.5)))
    got = pr.where(pr.tensor(c), -1, pr.tensor(b)).numpy()
    np.testing.assert_array_equal(got, np.where(c, np.float32(-1), b))
    ci = rng.integers(-1, 2, (4, 5)).astype(np.int32)  # a non-bool condition: nonzero
    got = pr.where(pr.tensor(ci), pr.tensor(a), pr.tensor(b)).numpy()
    np.testing.assert_array_equal(got, np.where(ci != 0, a, b))


def test_clamp(rng):
    a = rng.uniform(-5, 5, (13, 17)).astype(np.float32)
    a[0, :3] = [np.nan, np.inf, -np.inf]
    t = torch.from_numpy(a)
    p = pr.tensor(a)
    for kw in ({"min": -1.0}, {"max": 2.0}, {"min": -1.0, "max": 2.0}, {"min": -1, "max": 2}):
        np.testing.assert_array_equal(p.clamp(**kw).numpy(), t.clamp(**kw).numpy(), str(kw))
    lo = rng.uniform(-3, 0, (17,)).astype(np.float32)
    hi = rng.uniform(0, 3, (13, 1)).astype(np.float32)
    np.testing.assert_array_equal(
        p.clamp(pr.tensor(lo), pr.tensor(hi)).numpy(),
        t.clamp(torch.from_numpy(lo), torch.from_numpy(hi)).numpy(),
    )
    i = rng.integers(-9, 9, 31).astype(np.int32)
    np.testing.assert_array_equal(pr.tensor(i).clamp(-3, 4).numpy(), np.clip(i, -3, 4))
    out = pr.empty(13, 17)
    p.clamp(-1.0, 1.0, out=out)
    np.testing.assert_array_equal(out.numpy(), t.clamp(-1.0, 1.0).numpy())


def test_lerp(rng):
    a = rng.standard_normal((3, 1, 5)).astype(np.float32)
    b = rng.standard_normal((4, 5)).astype(np.float32)
    w = rng.random((5,)).astype(np.float32)
    want = torch.lerp(
        torch.from_numpy(a).double(), torch.from_numpy(b).double(), torch.from_numpy(w).double()
    ).numpy()
    bound = 4 * EPS32 * (np.abs(a) + 2 * np.abs(b) + np.abs(a))
    got = pr.lerp(pr.tensor(a), pr.tensor(b), pr.tensor(w)).numpy()
    assert np.all(np.abs(got - want) <= bound + 1e-30)
    got = pr.lerp(pr.tensor(a), pr.tensor(b), 0.25).numpy()
    want = torch.lerp(torch.from_numpy(a).double(), torch.from_numpy(b).double(), 0.25).numpy()
    assert np.all(np.abs(got - want) <= bound + 1e-30)


def test_nan_to_num():
    a = np.array([np.nan, np.inf, -np.inf, 1.5, -0.0], np.float32)
    t = torch.from_numpy(a)
    np.testing.assert_array_equal(pr.nan_to_num(pr.tensor(a)).numpy(), torch.nan_to_num(t))
    np.testing.assert_array_equal(
        pr.tensor(a).nan_to_num(1.0, 2.0, -3.0).numpy(), torch.nan_to_num(t, 1.0, 2.0, -3.0)
    )
    h = a.astype(np.float16)
    np.testing.assert_array_equal(
        pr.nan_to_num(pr.tensor(h)).numpy(), torch.nan_to_num(torch.from_numpy(h)).numpy()
    )


# ---- casts -----------------------------------------------------------------------------------
CAST_VALUES = np.array([0.0, -0.0, 1.0, -1.0, 2.5, -2.5, 0.4, 1e4, -7.9, 65504.0, 3.0], np.float64)


@pytest.mark.parametrize("src", ["float32", "float16", "int32", "bool"])
@pytest.mark.parametrize("dst", ["float32", "float16", "int32", "bool"])
def test_casts(src, dst):
    if src == "bool":
        a = np.array([True, False, True, True, False])
    elif src == "int32":
        a = np.array([0, 1, -1, 7, -100000, 65504, 2**31 - 1], np.int32)
    else:
        a = CAST_VALUES.astype(src)
    if src == "int32" and dst == "float16":
        a = a[np.abs(a) <= 65504]
    t = torch.from_numpy(a).to(_TD[dst])
    p = pr.tensor(a).to(getattr(pr, dst))
    assert p.dtype is getattr(pr, dst)
    np.testing.assert_array_equal(p.numpy(), t.numpy())
    # through a strided, negative-step view too
    v = pr.tensor(a)[::-2].to(getattr(pr, dst))
    np.testing.assert_array_equal(v.numpy(), t.numpy()[::-2])


# ---- in-place, copy_, fill_ -----------------------------------------------------------------
def test_inplace_on_views(rng):
    a = rng.standard_normal((7, 9)).astype(np.float32)
    p, t = pr.tensor(a), torch.from_numpy(a.copy())
    storage = p._storage
    pv, tv = p[1:6:2, ::-3], t[1:6:2].flip(-1)[:, ::3]
    # torch has no negative steps: build the same elements by index
    rows, cols = np.arange(1, 6, 2), np.arange(8, -1, -3)
    pv += 1.5
    a[np.ix_(rows, cols)] += np.float32(1.5)
    pv.add_(pr.ones(3, 1), alpha=2)
    a[np.ix_(rows, cols)] += np.float32(2)
    pv.mul_(pr.tensor(np.arange(3, dtype=np.float32)))
    a[np.ix_(rows, cols)] *= np.arange(3, dtype=np.float32)
    pt = p.T
    pt[2:4] -= pt[0:2]  # overlapping read and write of one storage
    a.T[2:4] -= a.T[0:2].copy()
    assert p._storage is storage
    np.testing.assert_array_equal(p.numpy(), a)
    del tv
    i = pr.tensor(np.arange(10, dtype=np.int32))
    i //= 3
    np.testing.assert_array_equal(i.numpy(), np.arange(10) // 3)
    with pytest.raises(TypeError, match="can't be cast"):
        i += 0.5
    with pytest.raises(TypeError, match="can't be cast"):
        i /= 2


def test_copy_and_fill(rng):
    a = pr.zeros(5, 6)
    src = rng.standard_normal(6).astype(np.float32)
    a[1:4].copy_(pr.tensor(src))
    want = np.zeros((5, 6), np.float32)
    want[1:4] = src
    np.testing.assert_array_equal(a.numpy(), want)
    a[:, ::-2].fill_(7)
    want[:, ::-2] = 7
    np.testing.assert_array_equal(a.numpy(), want)
    a.T[0].copy_(pr.tensor(np.arange(5, dtype=np.int32)))  # cast on copy
    want.T[0] = np.arange(5)
    np.testing.assert_array_equal(a.numpy(), want)
    b = pr.zeros(4, dtype=pr.int32)
    b.fill_(pr.tensor(3.7))
    np.testing.assert_array_equal(b.numpy(), np.full(4, 3, np.int32))
    h = pr.zeros(3, dtype=pr.float16)
    h.copy_(pr.tensor([1.0, 2.5, 65504.0]))
    np.testing.assert_array_equal(h.numpy(), np.array([1.0, 2.5, 65504.0], np.float16))
    a.zero_()
    assert not a.numpy().any()


# ---- negative steps, grid folding ------------------------------------------------------------
@pytest.mark.parametrize("name", ["exp", "add", "where"])
def test_negative_step_inputs(name, rng):
    a = rng.standard_normal((6, 11)).astype(np.float32)
    b = rng.standard_normal((11,)).astype(np.float32)
    pa = pr.tensor(a)[::-1, ::-2]
    pb = pr.tensor(b)[::-2]
    na, nb = a[::-1, ::-2], b[::-2]
    if name == "exp":
        got, want = pa.exp().numpy(), np.exp(na.astype(np.float64))
        assert_close(got.astype(np.float64), want, 0, 8 * ULP * 4, name)
    elif name == "add":
        np.testing.assert_array_equal((pa + pb).numpy(), na + nb)
    else:
        np.testing.assert_array_equal(pr.where(pa > 0, pa, pb).numpy(), np.where(na > 0, na, nb))


def test_grid_fold(monkeypatch):
    """More than 65,535 workgroups of 256: the grid folds into y; every element written.

    The map takes 4-8 elements an invocation (ops/core.py per_thread); forcing 1 reaches the
    fold at 16.8M elements instead of 134M, which lavapipe could not hold in this test's time."""
    from pyrite.ops import core

    monkeypatch.setattr(core, "_PER_THREAD_ENV", "1")
    monkeypatch.setattr(core, "POISON", False)  # count the map's own dispatches only
    dev = backend.current()
    grids = []
    real = dev.dispatch

    def spy(src, buffers, info, grid):
        grids.append(tuple(grid))
        return real(src, buffers, info, grid)

    monkeypatch.setattr(dev, "dispatch", spy)
    n = 65535 * 256 + 1001  # (not a multiple of 4: the scalar map, whose grid folds first)
    x = pr.arange(n, dtype=pr.int32)
    y = (x * 3 + 1).numpy()
    assert sum(g[1] > 1 for g in grids) >= 3, grids  # arange, *, + all folded
    assert y[0] == 1 and y[-1] == (n - 1) * 3 + 1
    np.testing.assert_array_equal(y[::9973], np.arange(n, dtype=np.int64)[::9973] * 3 + 1)
    z = y[65535 * 256 - 3 : 65535 * 256 + 3]
    np.testing.assert_array_equal(z, np.arange(65535 * 256 - 3, 65535 * 256 + 3) * 3 + 1)


def test_no_extra_dispatch_for_scalar_operand():
    x = pr.ones(7)
    dev = backend.current()
    before = dev.dispatches
    x + 2.0
    assert dev.dispatches - before <= 2  # poisoning may add one fill


# ---- regressions found by the differential sweep (tests/test_sweep.py) -------------------------
def _both(f):
    """f(torch) and f(pyrite), each as (dtype name, values) or the error class raised."""
    out = []
    for L in (torch, pr):
        try:
            r = f(L)
            name = str(r.dtype).split(".")[-1]
            out.append(
                ({"int64": "int32", "float64": "float32"}.get(name, name), r.float().tolist())
            )
        except Exception as e:  # noqa: BLE001
            out.append(type(e))
    return out


def test_sweep_bool_unary_ops():
    # torch refuses these on bool (neg: RuntimeError; the rest "not implemented for 'Bool'")
    for name in ("neg", "abs", "relu", "floor", "ceil", "round", "trunc", "frac"):
        with pytest.raises((TypeError, RuntimeError)):
            getattr(pr, name)(pr.tensor([True, False]))
    with pytest.raises(TypeError, match="frac"):
        pr.frac(pr.tensor([1, 2]))
    t, p = _both(lambda L: L.sign(L.tensor([True, False])))  # sign of a bool is a bool
    assert p == t == ("bool", [1.0, 0.0])


def test_sweep_inplace_unary_refuses_a_float_result_in_an_int_tensor():
    for m in ("exp_", "sqrt_", "sigmoid_", "sin_"):
        with pytest.raises(TypeError, match="can't be cast"):
            getattr(pr.tensor([1, 2]), m)()
    x = pr.tensor([True, False])
    assert x.sign_() is x  # bool -> bool is fine


def test_sweep_inplace_on_an_empty_expanded_view():
    x = pr.ones(0, 1).expand(0, 3)
    assert x.add_(1) is x  # nothing written twice: torch allows it too


def test_sweep_tensor_where_argument_order():
    c = pr.tensor([True, False, True])
    x, y = pr.tensor([1.0, 2.0, 3.0]), pr.tensor([-1.0, -2.0, -3.0])
    assert x.where(c, y).tolist() == [1.0, -2.0, 3.0]  # torch.where(c, x, y)


def test_sweep_zero_dim_operand_cast_to_a_small_int_result():
    # the 0-d int16 -10 is cast to the uint8 result type first (246), as torch
    for f in (
        lambda L: L.maximum(L.tensor(-10, dtype=L.int16), L.tensor([14, 200], dtype=L.uint8)),
        lambda L: L.tensor([14, 200], dtype=L.uint8) < L.tensor(-10, dtype=L.int16),
        lambda L: L.tensor([14, 200], dtype=L.uint8) // L.tensor(300),
        lambda L: L.tensor([100], dtype=L.int8) > L.tensor(300),
    ):
        t, p = _both(f)
        assert p == t


def test_sweep_pow_shortcuts_keep_torch_dtypes():
    for f in (
        lambda L: L.tensor([2, 3]) ** 2.0,  # a float exponent makes a float
        lambda L: L.tensor([True, False]) ** 1,  # bool ** int is an int
        lambda L: L.tensor([True, False]) ** False,  # torch's shortcut: ones, bool
        lambda L: L.tensor([True, False]) ** True,
        lambda L: L.tensor([True, False]) ** 2.0,
    ):
        t, p = _both(f)
        assert p == t


def test_sweep_alpha_does_not_promote():
    for f in (
        lambda L: L.add(L.tensor([True, False]), L.tensor([True, True]), alpha=2),  # bool
        lambda L: L.add(L.tensor([1], dtype=L.int8), L.tensor([200], dtype=L.uint8), alpha=2),
        lambda L: L.sub(L.tensor([1.0]), L.tensor([2]), alpha=0.5),
    ):
        t, p = _both(f)
        assert p == t
    for f in (
        lambda L: L.add(L.tensor([1]), L.tensor([2]), alpha=0.5),  # float alpha, int tensors
        lambda L: L.add(L.tensor([1.0]), L.tensor([True]), alpha=True),  # bool alpha, float
        lambda L: L.sub(L.tensor([1]), L.tensor([True]), alpha=2),  # bool subtraction
    ):
        t, p = _both(f)
        assert isinstance(t, type) and issubclass(p, Exception), (t, p)


def test_sweep_addcmul_rounds_once():
    # torch computes input + value * t1 * t2 in f32 and rounds once to float16 / bfloat16
    rng = np.random.default_rng(5)
    a, b, c = (rng.uniform(-4, 4, 257) for _ in range(3))
    for dt in ("float16", "bfloat16"):
        for name in ("addcmul", "addcdiv"):
            tt = [torch.tensor(v).to(getattr(torch, dt)) for v in (a, b, c)]
            want = getattr(torch, name)(*[t.double() for t in tt], value=0.5).to(getattr(torch, dt))
            got = getattr(pr, name)(*[pr.tensor(t) for t in tt], value=0.5).float().numpy()
            assert_close(got.astype(np.float64), want.double().numpy(), 1e-6, 2 * 2.0**-8, name)
    with pytest.raises(RuntimeError, match="Integer division"):
        pr.addcdiv(pr.tensor([1]), pr.tensor([2]), pr.tensor([3]))
    for value in (0.5, 1.7):  # torch casts value to the integer type
        t, p = _both(lambda L: L.addcmul(L.tensor([1]), L.tensor([2]), L.tensor([3]), value=value))
        assert p == t


def test_sweep_round_decimals_in_one_pass():
    x = torch.tensor([3.41, 31.61, 9.406, -53.52], dtype=torch.float16)
    for d in (2, 1, -1):
        want = torch.round(x.float(), decimals=d).half()  # torch rounds x*10^d in f32
        got = pr.round(pr.tensor(x), decimals=d)
        assert got.dtype is pr.float16
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_sweep_lerp_wants_one_dtype():
    with pytest.raises(TypeError, match="end"):
        pr.lerp(pr.ones(2), pr.ones(2, dtype=pr.float16), 0.5)
    with pytest.raises(TypeError, match="weight"):
        pr.lerp(pr.ones(2), pr.ones(2), pr.ones(2, dtype=pr.bfloat16))


def test_sweep_clamp_of_bool():
    t, p = _both(lambda L: L.tensor([True, False]).clamp(-0.5, 2.5))  # a float bound promotes
    assert p == t
    with pytest.raises(TypeError):
        pr.tensor([True, False]).clamp(min=False)


def test_sweep_pow_accuracy_and_special_cases():
    # integer exponents by squaring (10.0 ** 3 was 999.99994 through exp2/log2), C's answers
    # for infinite exponents and bases, signed zeros
    inf, nan = float("inf"), float("nan")
    xs = [10.0, -2.0, 0.0, -0.0, 1.5, -1.0, 2.0, -inf, inf, nan, 0.5, -0.5, 3.0, 1e-3, -7.0]
    ys = [3.0, -1.0, 2.0, 0.0, inf, -inf, 0.5, -3.0, 7.0, 64.0, 65.0, 1.5, -2.0, -0.5, 30.0]
    X, Y = (a.ravel().astype(np.float32) for a in np.meshgrid(xs, ys))
    want = torch.pow(torch.tensor(X), torch.tensor(Y)).numpy()
    got = pr.pow(pr.tensor(X), pr.tensor(Y)).numpy()
    # exact-ish by squaring for |y| <= 64; beyond, WGSL's exp2 bound (3 + 2|y log2 x| ulp)
    np.testing.assert_allclose(got, want, rtol=400 * 2.0**-23, equal_nan=True)
    small = (np.abs(Y) <= 64) & (Y == np.round(Y)) & np.isfinite(want) & (want != 0)
    np.testing.assert_allclose(got[small], want[small], rtol=8 * 2.0**-23)
    finite = ~np.isnan(want)
    np.testing.assert_array_equal(np.signbit(got[finite]), np.signbit(want[finite]))
    assert (pr.tensor([10.0]) ** pr.tensor([3.0])).item() == 1000.0
    with pytest.raises(RuntimeError, match="negative integer powers"):
        pr.tensor([2]) ** -1


def test_sweep_round_decimals_scale_is_exact():
    # the scale came from this module's `abs` (an op), i.e. 10.0 ** tensor(3) = 999.99994
    x = pr.tensor([54.8275032043457, 42.678504943847656, 1234.5])
    t = torch.tensor(x.numpy())
    for d in (3, -2):
        np.testing.assert_array_equal(
            pr.round(x, decimals=d).numpy(), torch.round(t, decimals=d).numpy()
        )


def test_sweep_zero_dim_float_cast_to_a_half_result():
    # bf16 x == f32 0-d y compares with bf16(y); bf16 / f32 0-d is bf16 (ops/fallback.py too)
    for f in (
        lambda L: L.tensor([0.1, 0.2], dtype=L.bfloat16) == L.tensor(0.1),
        lambda L: L.ones(3, dtype=L.bfloat16) / L.tensor(3.0),
        lambda L: L.div(L.ones(3, dtype=L.bfloat16), L.tensor(3.0)),
        lambda L: L.fmod(L.ones(3, dtype=L.bfloat16) * 7, L.tensor(2.0)),
        lambda L: L.xlogy(L.tensor(-10, dtype=L.int16), L.tensor([3], dtype=L.uint8)),
        lambda L: L.tensor([14, 200], dtype=L.uint8) / L.tensor(-1),  # true division: uncast
        lambda L: L.lcm(L.tensor([14], dtype=L.uint8), L.tensor(-10)),
    ):
        t, p = _both(f)
        assert p == t


def test_sweep_lerp_and_float_power_follow_torch():
    inf = float("inf")
    a, b = [1.0, -inf, 2.0, 0.0], [inf, 1.0, 3.0, 1.0]
    for w in (0.25, 0.75, 1.0, 0.0):
        t, p = _both(lambda L: L.lerp(L.tensor(a), L.tensor(b), w))
        assert p == t or str(p) == str(t), w  # NaN compares unequal
    t, p = _both(lambda L: L.float_power(L.tensor(2), L.tensor([1.5], dtype=L.bfloat16)))
    assert p[0] == t[0] == "float32"  # float64 (float32 here) whatever the operands
    np.testing.assert_allclose(p[1], t[1], rtol=1e-6)


def test_sweep_bf16_augmented_assignment_writes_in_place():
    # ops/fallback.py did not count x //= y as in place: x kept its old values
    for op in ("__ifloordiv__", "__imod__"):
        x = pr.ones(3, dtype=pr.bfloat16) * 7
        y = x
        r = getattr(x, op)(2)
        assert r is y and y.float().tolist() == ([3.0] * 3 if op == "__ifloordiv__" else [1.0] * 3)


def test_sweep_integer_division_of_empty_tensors():
    assert pr.tensor([], dtype=pr.int32).reshape(0, 3) // pr.zeros(3, dtype=pr.int32) is not None
    assert (pr.ones(2, 0, dtype=pr.int8) % False).shape == (2, 0)


def test_sweep_copy_of_a_python_number_casts():
    x = pr.ones(3, dtype=pr.uint8)
    assert (
        x.copy_(-2.97).tolist()
        == torch.ones(3, dtype=torch.uint8).copy_(torch.tensor(-2.97)).tolist()
    )
    with pytest.raises(RuntimeError, match="more than one element"):
        pr.ones(1).expand(3).copy_(1.5)


def test_sweep_clamp_without_bounds_is_a_runtime_error():
    with pytest.raises(RuntimeError, match="At least one of 'min' or 'max'"):
        pr.ones(2).clamp()


def test_sweep_three_way_promotion_of_where_and_clamp():
    # torch promotes the three operands at once: a scalar first counts, a 0-d tensor only
    # raises the category (clamp(bool, int32 0-d, int16) is int16)
    c = [True, False]
    for f in (
        lambda L: L.where(L.tensor(c), 1.0, L.tensor([1, 2])),
        lambda L: L.where(L.tensor(c), True, 2.5),
        lambda L: L.clamp(
            L.tensor([True, False]), L.tensor(0, dtype=L.int32), L.tensor([1, 1], dtype=L.int16)
        ),
        lambda L: L.clamp(
            L.tensor([0.3, 2.0], dtype=L.bfloat16),
            L.tensor(0.07581847, dtype=L.float64),
            L.tensor([1.0, 1.5]),
        ),
    ):
        t, p = _both(f)
        assert p == t


def test_sweep_zero_dim_float_divisor_kept_in_f32():
    if not has_f16():
        pytest.skip("needs shader-f16")
    # torch rounds a 0-d float operand to the float16 result type only where it rounds a
    # Python scalar (add, compare...): f16(-17.25) // f32(5.7493596) is floor(-3.0003) = -4
    t, p = _both(lambda L: L.tensor([-17.25], dtype=L.float16) // L.tensor(5.749359607696533))
    assert p == t == ("float16", [-4.0])


# ---- the vec4 map (kernels/elementwise.vec4_map_kernel) -----------------------------------------
def _last_map_src():
    from pyrite.ops import core

    return next(reversed(core._plans.values()))[0].wgsl


def _fresh():
    """Forget the maps' plans, so the next map's plan is the last one (a plan already cached by
    an earlier test would keep its old place in the dict, and _last_map_src read another's)."""
    from pyrite.ops import bound, core

    core._plans.clear()
    bound.clear()  # (a bound operator call would skip the maps' plans)


@pytest.mark.parametrize("n", [4, 1024, 4 * 1037])
def test_vec4_map_parity(n, rng):
    """Contiguous maps whose size and offsets are multiples of 4 take the vec4 kernel: binary
    and scalar-operand ops, a one-element (broadcast) input, in place, float16, a wrapping
    uint8 product and an index expression (arange) give torch's values; a view at an odd offset
    or an odd size takes the scalar kernel and agrees too."""
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    x, y = pr.tensor(a), pr.tensor(b)
    _fresh()
    got = x * y + 0.5
    assert "array<vec4<f32>>" in _last_map_src()
    assert_close(got, (torch.from_numpy(a) * torch.from_numpy(b)) + 0.5)
    one = pr.tensor(np.float32(3.25)).reshape(1)
    _fresh()
    assert_close(x - one, torch.from_numpy(a) - 3.25)
    assert "array<vec4<f32>>" in _last_map_src()
    z = x.clone()
    z.mul_(y)
    assert_close(z, torch.from_numpy(a) * torch.from_numpy(b))
    assert_close(pr.arange(n, dtype=pr.float32) * 2, torch.arange(n, dtype=torch.float32) * 2)
    u = pr.tensor((np.arange(n) % 256).astype(np.int32)).to(pr.uint8)
    assert (u * 7).numpy().tolist() == ((torch.arange(n) % 256).to(torch.uint8) * 7).tolist()
    if has_f16():
        ha, hb = pr.tensor(a).half(), pr.tensor(b).half()
        _fresh()
        h = ha + hb
        assert "vec4<f16>" in _last_map_src()
        ref = torch.from_numpy(a).half() + torch.from_numpy(b).half()
        assert h.numpy().tolist() == ref.numpy().tolist()
    if n > 4:
        _fresh()
        got = x[1 : n - 3] + y[1 : n - 3]  # (odd offsets: the scalar kernel)
        assert "array<vec4<f32>>" not in _last_map_src()
        assert_close(got, torch.from_numpy(a[1 : n - 3] + b[1 : n - 3]))
        _fresh()
        got = x[4:] + y[4:]  # (offsets of 4: vec4 again)
        assert "array<vec4<f32>>" in _last_map_src()
        assert_close(got, torch.from_numpy(a[4:] + b[4:]))
