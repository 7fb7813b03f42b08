"""Bound plans for the operators (ops/bound.py): a call whose operand layout was seen skips the op
stack, and computes what the full path computes, for every operand kind it accepts; every call
it must not take (gradients, subclasses, integer results, other layouts) takes the full path."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import pyrite as pr
from pyrite.ops import bound, core

OPS = {
    "__add__": np.add,
    "__sub__": np.subtract,
    "__mul__": np.multiply,
    "__truediv__": np.divide,
    "__eq__": np.equal,
    "__ne__": np.not_equal,
    "__lt__": np.less,
    "__le__": np.less_equal,
    "__gt__": np.greater,
    "__ge__": np.greater_equal,
}


def _full_calls(monkeypatch):
    """A counter of the calls that took the full path (core.run_map), from no bound plans (an
    earlier test may have bound the layout a random shape repeats)."""
    bound.clear()
    calls = []
    real = core.run_map

    def counted(*a, **k):
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr("pyrite.ops.elementwise.run_map", counted)
    return calls


def _check(got, want, op):
    if want.dtype == bool:
        np.testing.assert_array_equal(got, want)
    else:  # (one rounding of an f32 op: compare in f64 with a few ulp)
        np.testing.assert_allclose(got, want, rtol=4e-7, atol=0)


@pytest.mark.parametrize("meth", sorted(OPS))
def test_bound_call_matches_the_full_path(meth, rng, monkeypatch):
    calls = _full_calls(monkeypatch)
    shape = (int(rng.integers(1, 9)), int(rng.integers(1, 70)))
    for i in range(3):  # the first call learns the layout; the rest take the plan
        a = rng.standard_normal(shape).astype(np.float32)
        b = rng.standard_normal(shape).astype(np.float32)
        b[0, 0] = a[0, 0]  # (an equal pair for the comparisons)
        got = getattr(pr.tensor(a), meth)(pr.tensor(b)).numpy()
        _check(got, OPS[meth](a, b), meth)
        s = float(rng.standard_normal())
        got = getattr(pr.tensor(a), meth)(s).numpy()
        _check(got, OPS[meth](a, np.float32(s)), meth)
    assert len(calls) == 2  # (one full call a layout: tensor ⊕ tensor, tensor ⊕ float)


def test_broadcasts_views_and_offsets_keep_their_own_plans(rng, monkeypatch):
    big = rng.standard_normal((6, 33)).astype(np.float32)
    row = rng.standard_normal(33).astype(np.float32)
    pb, prow = pr.tensor(big), pr.tensor(row)
    for start in (0, 1, 2, 1, 0):  # views at other offsets reuse the layout's plan
        got = (pb[start : start + 3] * prow).numpy()
        np.testing.assert_allclose(got, big[start : start + 3] * row, rtol=1e-7)
    got = (pb.t() - pb.t()[:, :1]).numpy()  # transposed strides: a layout of its own
    np.testing.assert_array_equal(got, big.T - big.T[:, :1])
    got = (pb[:, ::2] + 2).numpy()  # a strided view with an int scalar
    np.testing.assert_allclose(got, big[:, ::2] + 2, rtol=1e-7)


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_half_types_round_the_scalar_as_torch(dt, rng):
    a = rng.standard_normal((5, 17)).astype(np.float32)
    ta = torch.tensor(a).to(getattr(torch, dt))
    pa = pr.tensor(a).to(getattr(pr, dt))
    for s in (0.1, 3, -2.7):
        for meth in ("__mul__", "__add__", "__gt__", "__truediv__"):
            for _ in range(2):
                got = getattr(pa, meth)(s)
                want = getattr(ta, meth)(s)
                assert got.dtype == getattr(pr, dt) or want.dtype == torch.bool
                np.testing.assert_array_equal(got.float().numpy(), want.float().numpy())


def test_integer_results_keep_the_full_path(rng, monkeypatch):
    calls = _full_calls(monkeypatch)
    x = rng.integers(-50, 50, (4, 9)).astype(np.int32)
    for _ in range(3):
        got = pr.tensor(x) + 7
        np.testing.assert_array_equal(got.numpy(), x + 7)
        assert got.dtype == pr.int32
    assert len(calls) == 3
    # int tensor with a float scalar: a float result, bindable
    for _ in range(2):
        np.testing.assert_allclose((pr.tensor(x) * 0.5).numpy(), x * np.float32(0.5))


def test_gradients_subclasses_and_compile_take_the_full_path(rng):
    a = rng.standard_normal((3, 4)).astype(np.float32)
    x = pr.tensor(a)
    for _ in range(2):
        x * 2  # (the layout learned)
    w = pr.tensor(a).requires_grad_()
    y = w * 2
    assert y.grad_fn is not None
    y.sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), np.full_like(a, 2.0))
    v = w[1:]  # a view of a base that requires grad
    assert (v + x[1:]).grad_fn is not None
    p = pr.nn.Parameter(pr.tensor(a))
    assert (p * 2).grad_fn is not None
    with pr.no_grad():
        np.testing.assert_allclose((w * 2).numpy(), a * 2)

    f = pr.compile(lambda t: t * 3 + 1)
    for _ in range(3):
        np.testing.assert_allclose(f(x).numpy(), a * 3 + 1, rtol=1e-6)


def test_a_plan_is_kept_per_operator_and_bounded(rng, monkeypatch):
    monkeypatch.setattr(bound, "LIMIT", 3)
    for n in range(1, 8):  # more layouts than the limit: the table empties and refills
        a = rng.standard_normal((n, 3)).astype(np.float32)
        for _ in range(2):
            np.testing.assert_allclose((pr.tensor(a) - 1.5).numpy(), a - np.float32(1.5))
    assert 1 <= len(pr.Tensor.__sub__._pyrite_table) <= 3


@pytest.mark.parametrize(
    "meth,ref",
    [("__radd__", np.add), ("__rsub__", np.subtract), ("__rmul__", np.multiply),
     ("__rtruediv__", np.divide)],
)  # fmt: skip
def test_reflected_operators_with_a_number_first(meth, ref, rng, monkeypatch):
    calls = _full_calls(monkeypatch)
    shape = (int(rng.integers(1, 6)), int(rng.integers(1, 40)))
    for _ in range(3):
        a = rng.standard_normal(shape).astype(np.float32)
        s = float(rng.standard_normal())
        got = getattr(pr.tensor(a), meth)(s).numpy()
        _check(got, ref(np.float32(s), a), meth)
        got = getattr(pr.tensor(a), meth)(3).numpy()  # (an int: its own layout key)
        _check(got, ref(np.float32(3), a), meth)
    assert len(calls) == 2
    x = pr.tensor(rng.standard_normal(shape).astype(np.float32))  # the operator spelling
    np.testing.assert_allclose((2.5 - x).numpy(), 2.5 - x.numpy(), rtol=1e-7)
    np.testing.assert_allclose((1 / x).numpy(), np.float32(1) / x.numpy(), rtol=1e-7)


UNARY_REF = {
    "relu": lambda a: np.maximum(a, 0),
    "sigmoid": lambda a: 1 / (1 + np.exp(-a.astype(np.float64))),
    "tanh": np.tanh,
    "exp": np.exp,
    "abs": np.abs,
    "neg": np.negative,
    "sqrt": lambda a: np.sqrt(np.abs(a)),  # (called on |x| below)
    "floor": np.floor,
}


@pytest.mark.parametrize("name", sorted(UNARY_REF))
def test_unary_methods_bound(name, rng):
    shape = (int(rng.integers(1, 7)), int(rng.integers(1, 50)))
    for _ in range(3):
        a = rng.standard_normal(shape).astype(np.float32)
        if name == "sqrt":
            a = np.abs(a)
        got = getattr(pr.tensor(a), name)()
        np.testing.assert_allclose(
            got.numpy(), UNARY_REF[name](a.astype(np.float64)), rtol=3e-6, atol=1e-7
        )
    assert (pr.float32, shape, (shape[1], 1), 0) in pr.Tensor.__dict__[name]._pyrite_table


def test_unary_methods_full_path_cases(rng):
    a = rng.standard_normal((4, 33)).astype(np.float32)
    for _ in range(2):
        np.testing.assert_allclose((-pr.tensor(a)).numpy(), -a)
    w = pr.tensor(a).requires_grad_()  # gradients: recorded
    w.sigmoid().sum().backward()
    s = 1 / (1 + np.exp(-a.astype(np.float64)))
    np.testing.assert_allclose(w.grad.numpy(), s * (1 - s), rtol=1e-5, atol=1e-7)
    i = pr.tensor(rng.integers(-5, 5, (3, 4)).astype(np.int32))  # an int result: full path
    for _ in range(2):
        np.testing.assert_array_equal(i.abs().numpy(), np.abs(i.numpy()))
    # the functions keep their identity (a TransformerEncoderLayer compares `activation is F.relu`)
    layer = pr.nn.TransformerEncoderLayer(8, 2, dim_feedforward=12)
    assert layer.activation is pr.nn.functional.relu
    assert layer.activation_relu_or_gelu == 1
    assert getattr(pr.nn.functional.relu, "_pyrite_bound", None) is None


def test_bound_methods_are_outermost_and_complex_tensors_keep_the_guard(rng):
    """The bound methods are the Tensor's own (no second complex guard in front of them: it
    cost ~1 µs a call), and complex operands, which they do not bind, still take the guard's
    implementations call after call."""
    for meth in (*bound.OPERATORS["add"], "__mul__", "__neg__", "exp"):
        fn = getattr(pr.Tensor, meth)
        assert fn._pyrite_bound is not None and not getattr(fn, "_pyrite_complex", False), meth
    shape = (3, int(rng.integers(2, 40)))
    for _ in range(3):
        a = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)
        b = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)
        ta, tb = pr.tensor(a), pr.tensor(b)
        for got, want in (
            (ta + tb, a + b),
            (ta * tb, a * b),
            (-ta, -a),
            (ta.exp(), np.exp(a.astype(np.complex128))),
            (2.0 - ta, 2.0 - a),
        ):
            np.testing.assert_allclose(got.numpy(), want, rtol=2e-6, atol=2e-6)


def test_parameters_bind_where_no_grad_is_recorded(rng, monkeypatch):
    """A parameter takes the bound plan under no_grad (an inference model's `self.weight * x`)
    and where it does not require grad, and the full path (recording its gradient) otherwise."""
    calls = _full_calls(monkeypatch)
    shape = (int(rng.integers(2, 9)), int(rng.integers(2, 50)))
    w0 = rng.standard_normal(shape).astype(np.float32)
    p = pr.nn.Parameter(pr.tensor(w0))
    frozen = pr.nn.Parameter(pr.tensor(w0), requires_grad=False)
    with pr.no_grad():
        for i in range(3):
            a = rng.standard_normal(shape).astype(np.float32)
            x = pr.tensor(a)
            for got, want in ((p * x, w0 * a), (x - p, a - w0), (p.exp(), np.exp(w0))):
                assert not got.requires_grad and type(got) is pr.Tensor
                np.testing.assert_allclose(got.numpy(), want, rtol=4e-7, atol=0)
        learned = len(calls)
        _ = p * x, x - p, p.exp()
        assert len(calls) == learned  # (bound: no full-path map)
    for _ in range(2):
        got = frozen + x
        np.testing.assert_allclose(got.numpy(), w0 + a, rtol=4e-7, atol=0)
        assert not got.requires_grad
    y = p * x
    assert y.requires_grad and y.grad_fn is not None
    y.sum().backward()
    np.testing.assert_allclose(p.grad.numpy(), a, rtol=0, atol=0)


ARITH = {"__add__": "add", "__sub__": "sub", "__mul__": "mul", "__truediv__": "div"}
REFLECTED = {"__radd__": "add", "__rsub__": "sub", "__rmul__": "mul", "__rtruediv__": "div"}
CASES = [(m, p) for m in sorted(ARITH) for p in ("a", "b", "ab", "a-number")]
CASES += [(m, "a-number") for m in sorted(REFLECTED)]  # (2 - x: a number first)


@pytest.mark.parametrize("meth,pattern", CASES)
def test_recorded_calls_take_the_plan_and_record_the_full_paths_node(meth, pattern, rng,
                                                                     monkeypatch):  # fmt: skip
    """A call autograd records takes the bound plan once a full call of its layout and pattern of
    operands requiring grad was seen, and records the node the full path records (op name and
    rule): values and gradients match torch's on every call, the first alone runs the full path."""
    calls, forward_maps = _full_calls(monkeypatch), []
    shape = (int(rng.integers(1, 7)), int(rng.integers(1, 60)))
    for _ in range(3):
        a = rng.standard_normal(shape).astype(np.float32)
        b = rng.standard_normal(shape).astype(np.float32) + 3.0  # (away from 0: the division)
        s = float(rng.standard_normal()) + 3.0
        pa = pr.tensor(a).requires_grad_("a" in pattern)
        ta = torch.tensor(a, requires_grad="a" in pattern)
        if pattern == "a-number":
            pb, tb = s, s
        else:
            pb = pr.tensor(b).requires_grad_("b" in pattern)
            tb = torch.tensor(b, requires_grad="b" in pattern)
        before = len(calls)
        got, want = getattr(pa, meth)(pb), getattr(ta, meth)(tb)
        forward_maps.append(len(calls) - before)
        assert got.grad_fn is not None and got.requires_grad
        g = rng.standard_normal(shape).astype(np.float32)
        got.backward(pr.tensor(g))
        want.backward(torch.tensor(g))
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=4e-7)
        for p, t in ((pa, ta), (pb, tb)):
            if isinstance(t, torch.Tensor) and t.requires_grad:
                np.testing.assert_allclose(p.grad.numpy(), t.grad.numpy(), rtol=2e-6, atol=1e-7)
    assert forward_maps == [1, 0, 0]  # (the first call learns; the later ones are bound)
    node = got.grad_fn
    assert node._name == {**ARITH, **REFLECTED}[meth]


def test_recorded_bound_calls_keep_autograds_checks(rng):
    """The node a bound call records saves what the full path's saves: an input it reads, written
    in place afterwards, fails the backward as torch's does; graphs of many bound calls chain."""
    a = rng.standard_normal((4, 9)).astype(np.float32)
    b = rng.standard_normal((4, 9)).astype(np.float32)
    w = pr.tensor(a).requires_grad_()
    for _ in range(3):  # (learned, then bound)
        x = pr.tensor(b)
        y = w * x
        x.add_(1)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.sum().backward()
    tw = torch.tensor(a, requires_grad=True)
    t, p = tw, w
    for k in range(20):  # a chain of recorded bound calls: one graph
        t = t * 1.01 + k / 7 - t / 3
        p = p * 1.01 + k / 7 - p / 3
    g = rng.standard_normal((4, 9)).astype(np.float32)
    p.backward(pr.tensor(g))
    t.backward(torch.tensor(g))
    np.testing.assert_allclose(p.detach().numpy(), t.detach().numpy(), rtol=1e-5)
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-5)
    v = w[1:]  # a view of a tensor that requires grad: the full path, recorded
    for _ in range(2):
        assert (v * 2).grad_fn is not None


@pytest.mark.parametrize(
    "meth", ["__neg__", "__abs__", "relu", "sigmoid", "tanh", "exp", "log", "sqrt", "square",
             "reciprocal", "erf", "silu", "sin"],
)  # fmt: skip
def test_recorded_unary_methods_take_the_plan(meth, rng, monkeypatch):
    """x.exp() on a tensor that requires grad: bound after the first call of its layout, with
    the full path's node; values and gradients match torch's every call."""
    calls, forward_maps = _full_calls(monkeypatch), []
    shape = (int(rng.integers(1, 7)), int(rng.integers(1, 60)))
    for _ in range(3):
        a = rng.standard_normal(shape).astype(np.float32)
        if meth in ("log", "sqrt", "reciprocal"):
            a = np.abs(a) + 0.5
        pa, ta = pr.tensor(a).requires_grad_(), torch.tensor(a, requires_grad=True)
        before = len(calls)
        got = getattr(pa, meth)()
        forward_maps.append(len(calls) - before)
        want = torch.nn.functional.silu(ta) if meth == "silu" else getattr(ta, meth)()
        g = rng.standard_normal(shape).astype(np.float32)
        got.backward(pr.tensor(g))
        want.backward(torch.tensor(g))
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=3e-6,
                                   atol=1e-7)  # fmt: skip
        np.testing.assert_allclose(pa.grad.numpy(), ta.grad.numpy(), rtol=1e-5, atol=1e-6)
    assert forward_maps == [1, 0, 0]
