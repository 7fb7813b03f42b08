"""The PyTorch names added for ported scripts (ops/porting.py, ops/series.py, einsum's sublist
form, set_detect_anomaly as a context manager, post-accumulate-grad hooks, more out=), each
against torch CPU on awkward inputs, gradients included where differentiable."""

from __future__ import annotations

import inspect
import math
import warnings

import numpy as np
import pytest
import torch

import pyrite as pr


def _np(t):
    return t.detach().numpy() if hasattr(t, "detach") else np.asarray(t)


# ---- special functions (ops/series.py) ---------------------------------------------------------
@pytest.mark.parametrize("n", [0, 1, 2, 3, 6])
def test_polygamma_forward_and_grad(n, rng):
    x = np.concatenate(
        [rng.uniform(0.05, 30, 17), rng.uniform(-4.9, -0.1, 7), [1.0, 2.0, 1e-3, 100.0]]
    ).astype(np.float32)
    x = x[np.abs(x - np.round(x)) > 1e-2] if n == 0 else x  # digamma's poles: pyrite's own op
    tx = torch.tensor(x, requires_grad=True)
    px = pr.tensor(x, requires_grad=True)
    want, got = torch.polygamma(n, tx), pr.polygamma(n, px)
    w, g = want.detach().numpy().astype(np.float64), _np(got).astype(np.float64)
    # near the negative poles the value is large and ill-conditioned in x: relative to |value|,
    # f32's rounding of x itself moves it by ~(n+1)·eps·|x|/dist(x, pole)
    np.testing.assert_allclose(g, w, rtol=2e-4, atol=1e-5)
    if n > 0:
        want.sum().backward()
        got.sum().backward()
        np.testing.assert_allclose(_np(px.grad), tx.grad.numpy(), rtol=5e-4, atol=1e-4)
    # the method and the special-namespace spellings are the same function
    np.testing.assert_array_equal(_np(pr.tensor(x).polygamma(n)), g.astype(np.float32))
    np.testing.assert_array_equal(_np(pr.special.polygamma(n, pr.tensor(x))), g.astype(np.float32))


def test_polygamma_errors_and_inplace():
    with pytest.raises(RuntimeError, match="does not support negative n"):
        pr.polygamma(-1, pr.ones(2))
    a, t = pr.tensor([0.5, 3.0]), torch.tensor([0.5, 3.0])
    a.polygamma_(1)
    t.polygamma_(1)
    np.testing.assert_allclose(_np(a), t.numpy(), rtol=1e-6)


def test_zeta(rng):
    x = np.concatenate([rng.uniform(1.01, 12, 13), [1.0, 0.5, 2.0, 3.0, 40.0, 4.0, 3.5]])
    q = np.concatenate([rng.uniform(0.01, 20, 13), [2.0, 1.0, 0.0, -2.0, 3.0, -1.5, -1.5]])
    x, q = x.astype(np.float32), q.astype(np.float32)
    want = torch.special.zeta(torch.tensor(x), torch.tensor(q)).numpy()
    got = _np(pr.special.zeta(pr.tensor(x), pr.tensor(q)))
    np.testing.assert_allclose(got, want, rtol=3e-6, equal_nan=True)
    # scalar operands and broadcasting
    want = torch.special.zeta(2.0, torch.tensor(q[:5])[:, None] * torch.ones(3)).numpy()
    got = _np(pr.special.zeta(2.0, pr.tensor(q[:5])[:, None] * pr.ones(3)))
    np.testing.assert_allclose(got, want, rtol=3e-6)


def test_erfcx(rng):
    x = np.concatenate(
        [rng.uniform(-9, 30, 31), [-np.inf, np.inf, np.nan, 0.0, 4.999, 5.0, 5.001, 1e4, 1e30]]
    ).astype(np.float32)
    want = torch.special.erfcx(torch.tensor(x)).numpy()
    got = _np(pr.special.erfcx(pr.tensor(x)))
    # exp(x^2)·erfc(x): erfc's <= 2.9 ULP (ops/special.py) plus exp's rounding, which grows with
    # the argument (x = -8.4, exp(70.6): 4.6e-6 relative on lavapipe)
    np.testing.assert_allclose(got, want, rtol=1e-5, equal_nan=True)
    tx, px = torch.tensor(x[:31], requires_grad=True), pr.tensor(x[:31], requires_grad=True)
    torch.special.erfcx(tx).sum().backward()
    pr.special.erfcx(px).sum().backward()
    np.testing.assert_allclose(_np(px.grad), tx.grad.numpy(), rtol=1e-4, atol=1e-6)


def test_spherical_bessel_j0_and_bessel_aliases(rng):
    x = np.concatenate([rng.uniform(-40, 40, 23), [0.0, 0.3, -0.49, 0.5, np.inf, -np.inf]])
    x = x.astype(np.float32)
    want = torch.special.spherical_bessel_j0(torch.tensor(x)).numpy()
    got = _np(pr.special.spherical_bessel_j0(pr.tensor(x)))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
    for name in ("modified_bessel_i0", "modified_bessel_i1"):
        w = getattr(torch.special, name)(torch.tensor(x[:23] / 4)).numpy()
        g = _np(getattr(pr.special, name)(pr.tensor(x[:23] / 4)))
        np.testing.assert_allclose(g, w, rtol=1e-5)


# ---- einsum's sublist form ---------------------------------------------------------------------
@pytest.mark.parametrize(
    "subs",
    [
        ([0, 1], [2, 1], [0, 2]),
        ([0, 1], [1, 2]),
        ([Ellipsis, 1], [Ellipsis, 1], [Ellipsis]),
        ([27, 51], [51, 3], [3, 27]),
    ],
)
def test_einsum_sublists(subs, rng):
    a = rng.standard_normal((5, 7)).astype(np.float32)
    b = rng.standard_normal((3, 7) if subs[1][0] != 1 and subs[1] != [51, 3] else (7, 3))
    b = b.astype(np.float32)
    if subs[0] == [Ellipsis, 1]:
        b = rng.standard_normal((5, 7)).astype(np.float32)
    ta, tb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    pa, pb = pr.tensor(a, requires_grad=True), pr.tensor(b, requires_grad=True)
    rest = list(subs[2:])
    want = torch.einsum(ta, subs[0], tb, subs[1], *rest)
    got = pr.einsum(pa, subs[0], pb, subs[1], *rest)
    np.testing.assert_allclose(_np(got), want.detach().numpy(), rtol=1e-5, atol=1e-5)
    want.sum().backward()
    got.sum().backward()
    np.testing.assert_allclose(_np(pa.grad), ta.grad.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(_np(pb.grad), tb.grad.numpy(), rtol=1e-5, atol=1e-5)


def test_einsum_sublist_range():
    with pytest.raises(ValueError, match=r"within the range \[0, 52\)"):
        pr.einsum(pr.ones(2), [52])


# ---- in-place alpha with a scalar, out= ---------------------------------------------------------
@pytest.mark.parametrize(
    "form",
    ["x.add_(1, alpha=2)", "x.sub_(3, alpha=0.5)", "x.add_(y, alpha=-2)", "i.add_(1, alpha=3)",
     "i.sub_(2, alpha=2)"],
)  # fmt: skip
def test_inplace_alpha_scalar(form):
    x0 = np.array([1.5, -2.0, 7.25], np.float32)
    env = lambda m: {  # noqa: E731
        "x": m.tensor(x0.copy()), "y": m.tensor(x0[::-1].copy()), "i": m.tensor([1, 2, 3])
    }  # fmt: skip
    w, g = eval(form, env(torch)), eval(form, env(pr))
    np.testing.assert_array_equal(_np(g), w.numpy())
    assert str(g.dtype).split(".")[-1] == str(w.dtype).split(".")[-1].replace("int64", "int32")
    with pytest.raises(RuntimeError, match="alpha must not be a floating point"):
        pr.tensor([1, 2]).add_(1, alpha=0.5)


@pytest.mark.parametrize(
    "call",
    ["softmax(x, -1)", "log_softmax(x, 0)", "pow(x, 2)", "addcmul(x, x, x, value=0.5)",
     "addcdiv(x, x, x + 3, value=2)", "lerp(x, x * 2, 0.25)", "nan_to_num(x)", "diff(x, dim=1)",
     "clone(x)", "argsort(x, dim=1)", "count_nonzero(x, dim=0)", "logical_not(x)",
     "histc(x, bins=5)"],
)  # fmt: skip
def test_out_argument(call, rng):
    x = rng.standard_normal((3, 5)).astype(np.float32)
    want = eval("t." + call, {"t": torch, "x": torch.tensor(x)})
    o = pr.empty(0, dtype={"int64": pr.int32, "bool": pr.bool}.get(str(want.dtype)[6:], pr.float32))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = eval("t." + call.replace(")", ", out=o)", 1) if "(" in call else call,
                   {"t": pr, "x": pr.tensor(x), "o": o})  # fmt: skip
    assert got is o
    np.testing.assert_allclose(_np(o), want.numpy(), rtol=1e-5, atol=1e-6)


# ---- ops/porting.py -----------------------------------------------------------------------------
FORMS = [
    "t.detach(x)", "t.unsafe_chunk(x, 3, 1)", "t.unsafe_split(x, 2)", "x.unsafe_split(3, dim=1)",
    "t.unsafe_split_with_sizes(x, [1, 4], 1)", "x.unsafe_chunk(2)",
    "t.constant_pad_nd(x, (1, 2))", "t.constant_pad_nd(x, [0, 1, 2, 0], -3.5)",
    "t.nonzero_static(x > 0, size=4)", "t.nonzero_static(x > 0, size=40, fill_value=7)",
    "x.nonzero_static(size=0)", "t.nonzero_static(t.tensor(0.0), size=2)",
    "t.is_inference(x)", "x.is_cpu", "x.layout == t.strided",
    "t.cond(x.sum() > 0, lambda a: a * 2, lambda a: a - 1, (x,))",
    "t.cond(False, lambda a, b: a + b, lambda a, b: a - b, [x, x])",
    "t.while_loop(lambda i, a: i < 4, lambda i, a: (i + 1, a * 1.5), (t.tensor(0), x))[1]",
]  # fmt: skip


@pytest.mark.parametrize("form", FORMS)
def test_porting_forms(form, rng):
    x0 = rng.standard_normal((4, 5)).astype(np.float32)
    want = eval(form, {"t": torch, "x": torch.tensor(x0)})
    got = eval(form, {"t": pr, "x": pr.tensor(x0)})
    if isinstance(want, bool):
        assert got is want or (form == "x.is_cpu" and got is False), form
        return
    ws, gs = (want, got) if isinstance(want, (tuple, list)) else ((want,), (got,))
    assert len(ws) == len(gs)
    for w, g in zip(ws, gs):
        assert tuple(g.shape) == tuple(w.shape), form
        np.testing.assert_allclose(_np(g).astype(np.float64), w.numpy().astype(np.float64))


def test_constant_pad_nd_grad_and_detach(rng):
    x0 = rng.standard_normal((3, 4)).astype(np.float32)
    tx, px = torch.tensor(x0, requires_grad=True), pr.tensor(x0, requires_grad=True)
    wt = torch.tensor(rng.standard_normal((4, 7)).astype(np.float32))
    (torch.constant_pad_nd(tx, (2, 1, 0, 1), 5.0) * wt).sum().backward()
    (pr.constant_pad_nd(px, (2, 1, 0, 1), 5.0) * pr.tensor(wt.numpy())).sum().backward()
    np.testing.assert_allclose(_np(px.grad), tx.grad.numpy(), rtol=1e-6)
    d = pr.detach(px)
    assert not d.requires_grad and d.grad_fn is None
    assert pr.detach_(px * 2).requires_grad is False


def test_nonzero_static_errors():
    with pytest.raises(RuntimeError, match="non-negative"):
        pr.nonzero_static(pr.ones(2), size=-1)


def test_empty_permuted_strides():
    for size, perm in [((2, 3, 4), (0, 2, 1)), ((5, 1, 3, 2), (0, 2, 3, 1)), ((3,), (0,))]:
        w = torch.empty_permuted(size, perm)
        g = pr.empty_permuted(size, perm, dtype=pr.float16)
        assert tuple(g.shape) == tuple(w.shape) and tuple(g.stride()) == w.stride()
        assert g.dtype == pr.float16
    with pytest.raises(RuntimeError):
        pr.empty_permuted((2, 3), (0, 0))


def test_dlpack_round_trips():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(_np(pr.from_dlpack(a)), a)
    np.testing.assert_array_equal(_np(pr.from_dlpack(torch.tensor(a))), a)
    np.testing.assert_array_equal(_np(pr.from_dlpack(torch.utils.dlpack.to_dlpack(torch.tensor(a)))), a)  # fmt: skip
    t = torch.from_dlpack(pr.to_dlpack(pr.tensor(a).t()))
    np.testing.assert_array_equal(t.numpy(), a.T)


def test_layout_and_default_device():
    assert repr(pr.strided) == "pyrite.strided" and isinstance(pr.strided, pr.layout)
    assert pr.zeros(2, layout=pr.strided).layout is pr.strided
    assert pr.ones(3).layout == pr.strided
    assert pr.get_default_device() == pr.ones(1).device
    try:
        pr.set_default_device("cuda")
        assert str(pr.get_default_device()) == "cuda"
    finally:
        pr.set_default_device(None)
    assert pr.get_default_device() == pr.ones(1).device


# ---- autograd: anomaly mode, post-accumulate hooks ----------------------------------------------
def test_anomaly_switches_as_torch():
    assert pr.is_anomaly_enabled() is False
    with pr.autograd.set_detect_anomaly(True):
        assert pr.is_anomaly_enabled() and pr.is_anomaly_check_nan_enabled()
    assert pr.is_anomaly_enabled() is False
    pr.autograd.set_detect_anomaly(True)  # a plain call sets it
    assert pr.is_anomaly_enabled()
    pr.set_anomaly_enabled(False)
    assert not pr.is_anomaly_enabled()


def test_post_accumulate_grad_hook():
    log = {"t": [], "p": []}
    for m, key in ((torch, "t"), (pr, "p")):
        w = m.tensor([1.0, 2.0, 3.0], requires_grad=True)
        h = w.register_post_accumulate_grad_hook(lambda p, key=key: log[key].append(p.grad.sum().item()))  # fmt: skip
        (w * w).sum().backward()
        (w * 3).sum().backward(inputs=[w])
        h.remove()
        (w * 2).sum().backward()
        with pytest.raises(RuntimeError, match="non-leaf"):
            (w * 2).register_post_accumulate_grad_hook(lambda p: None)
    assert log["p"] == log["t"] == [12.0, 21.0]


# ---- the names exist with torch's parameter names -------------------------------------------------
ADDED = {
    "torch": "detach detach_ unsafe_chunk unsafe_split unsafe_split_with_sizes constant_pad_nd "
    "nonzero_static empty_permuted is_inference cond while_loop from_dlpack to_dlpack "
    "get_default_device set_default_device polygamma is_anomaly_enabled "
    "is_anomaly_check_nan_enabled set_anomaly_enabled",
    "special": "zeta polygamma erfcx spherical_bessel_j0 modified_bessel_i0 modified_bessel_i1",
    "Tensor": "unsafe_chunk unsafe_split unsafe_split_with_sizes nonzero_static polygamma "
    "polygamma_ register_post_accumulate_grad_hook",
}


@pytest.mark.parametrize("ns", sorted(ADDED))
def test_added_names_exist(ns):
    tns, pns = {"torch": (torch, pr), "special": (torch.special, pr.special),
                "Tensor": (torch.Tensor, pr.Tensor)}[ns]  # fmt: skip
    for name in ADDED[ns].split():
        assert hasattr(tns, name), name
        f = getattr(pns, name)
        try:
            want = inspect.signature(getattr(tns, name)).parameters
        except (TypeError, ValueError):
            continue  # a builtin without a signature
        got = inspect.signature(f).parameters
        missing = [p for p in want if p not in got and p not in ("self", "args", "kwargs")]
        assert not missing, (name, missing)


def test_zeta_needs_a_tensor():
    with pytest.raises(TypeError):
        pr.special.zeta(2.0, 1.0)
    assert math.isinf(pr.special.zeta(pr.tensor([1.0]), 2.0).item())
