"""The spellings PyTorch accepts (keyword and varargs forms, NumPy's axis/keepdims), creation's
errors in PyTorch's types and words, __setitem__'s value broadcasting, PYRITE_DEBUG parsing,
and the small compatibility functions of ops/misc.py — each against torch CPU."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import pyrite as pr

X = np.arange(24, dtype=np.float32).reshape(2, 3, 4)

FORMS = [
    "x.reshape(shape=(4, 6))", "x.reshape(4, 6)", "x.reshape((4, 6))", "x.reshape([4, -1])",
    "x.view(size=(4, 6))", "x.view(4, -1)", "x.view((4, -1))", "x.view(-1)",
    "x.permute(dims=(2, 0, 1))", "x.permute(2, 0, 1)", "x.permute((2, 0, 1))", "x.permute([2, 0, 1])",
    "x.transpose(dim0=0, dim1=2)", "x.swapaxes(0, 2)", "x.swapaxes(axis0=0, axis1=1)", "x.swapdims(0, 1)",
    "x.flip(0, 1)", "x.flip((0, 1))", "x.flip(dims=(0,))", "x.flip(0)", "t.flip(x, (0, 2))", "t.flip(x, dims=[1])",
    "x.repeat(2, 1, 1)", "x.repeat((2, 1, 1))", "x.repeat(repeats=(2, 1, 1))",
    "x[0].expand(2, -1, -1)", "x[:, :1].expand(2, 5, 4)", "x[:, :1].expand((2, 5, 4))",
    "x[:, :1].expand(size=(2, 5, 4))",
    "x.tile(2, 2)", "x.tile((2, 2))", "x.tile(dims=(2,))", "t.tile(x, (2, 1, 1, 1))",
    "x.new_zeros(2, 3)", "x.new_zeros((2, 3))", "x.new_zeros(size=(2, 3))", "x.new_ones(2)",
    "x.new_full((2, 3), 5)", "x.new_full(size=(2,), fill_value=3)",
    "t.zeros(size=(2, 3))", "t.ones(2, 3)", "t.ones([2, 3])", "t.zeros(t.Size([2]))",
    "x.sum((0, 1))", "x.sum(dim=(0, 1), keepdim=True)", "x.sum([0, 1])",
    "x.sum(axis=1)", "x.mean(axis=0, keepdims=True)", "t.sum(x, axis=(0, 2))",
    "x.max(axis=0).values", "x.amax((0, 1))", "x.amin(dim=(0, 2), keepdim=True)",
    "x.std(axis=1)", "t.cat([x, x], axis=1)", "x.softmax(axis=-1)", "x.cumsum(axis=0)",
    "x[:1, :1].squeeze((0, 1))", "x[:1].squeeze(dim=0)", "x.unsqueeze(dim=0)",
    "x.movedim(source=0, destination=2)", "x.narrow(dim=1, start=0, length=2)",
    "t.reshape(input=x, shape=(6, 4))", "t.permute(x, dims=(1, 0, 2))",
]  # fmt: skip


def _norm(r):
    if isinstance(r, (tuple, list)):
        return [_norm(v) for v in r]
    a = r.numpy() if hasattr(r, "numpy") else np.asarray(r)
    return a.astype(np.float64)


@pytest.mark.parametrize("form", FORMS)
def test_forms(form):
    want = eval(form, {"t": torch, "x": torch.from_numpy(X.copy())})
    got = eval(form, {"t": pr, "x": pr.tensor(X.copy())})
    w, g = _norm(want), _norm(got)
    assert np.shape(g) == np.shape(w), form
    np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


def test_form_conflicts():
    x = pr.ones(2, 3)
    with pytest.raises(TypeError, match="multiple values"):
        x.view(3, 2, size=(3, 2))
    with pytest.raises(TypeError, match="multiple values"):
        x.flip(0, dims=(1,))
    with pytest.raises(TypeError, match="alias"):
        x.sum(dim=0, axis=1)
    with pytest.raises(TypeError, match="unexpected keyword"):
        pr.zeros(2, foo=3)


# ---- creation errors -------------------------------------------------------------------------
@pytest.mark.parametrize(
    "call, exc, match",
    [
        ("t.zeros(2.5)", TypeError, "tuple of ints"),
        ("t.zeros((2, 3.0))", TypeError, "tuple of ints"),
        ("t.empty((2, None))", TypeError, "tuple of ints"),
        ("t.ones('a')", TypeError, "tuple of ints"),
        ("t.full((2,), 'x')", TypeError, "must be Number, not str"),
        ("t.full((2,), None)", TypeError, "must be Number, not NoneType"),
        ("t.eye(-1)", RuntimeError, "n must be greater or equal to 0, got -1"),
        ("t.eye(2, -1)", RuntimeError, "m must be greater or equal to 0"),
        ("t.eye(2.5)", TypeError, "'n' .*int"),
        ("t.linspace(0, 1, -5)", RuntimeError, "number of steps must be non-negative"),
        ("t.logspace(0, 1, -1)", RuntimeError, "number of steps must be non-negative"),
        ("t.linspace(0, 1, 2.5)", TypeError, "steps"),
        ("t.arange(0, 5, 0)", RuntimeError, "step must be nonzero"),
        ("t.arange(4, 2)", RuntimeError, "inconsistent with step sign"),
        ("t.arange(float('nan'))", RuntimeError, "unsupported range"),
        ("t.arange(0, float('inf'))", RuntimeError, "unsupported range"),
        ("t.zeros(-1)", RuntimeError, "negative dimension -1|Dimension size must be non-negative"),
        (
            "t.zeros(2, -3)",
            RuntimeError,
            "negative dimension -3|Dimension size must be non-negative",
        ),
        ("t.randn(-1)", RuntimeError, "negative dimension -1"),
        ("t.randperm(-1)", RuntimeError, "negative dimension"),
        ("t.randint(5, 5, (3,))", RuntimeError, "from=5 >= to=5"),
        ("t.randint(5, 2, (3,))", RuntimeError, "from=5 >= to=2"),
        ("t.normal(0, -1, (2,))", RuntimeError, "std >= 0.0"),
        (
            "t.tensor([[1, 2], [3]])",
            ValueError,
            "expected sequence of length 2 at dim 1 \\(got 1\\)",
        ),
        ("t.tensor([[[1, 2], [3, 4]], [[5, 6], [7]]])", ValueError, "at dim 2 \\(got 1\\)"),
        ("t.tensor(None)", RuntimeError, "Could not infer dtype of NoneType"),
        ("t.tensor([1, 'a'])", TypeError, "invalid data type 'str'"),
    ],
)
def test_creation_errors_as_torch(call, exc, match):
    with pytest.raises(exc, match=match):
        eval(call, {"t": torch})
    with pytest.raises(exc, match=match):
        eval(call, {"t": pr})
    assert pr.arange(3).tolist() == [0, 1, 2]


def test_creation_refusals_of_our_own():
    with pytest.raises(TypeError, match="floating-point"):
        pr.rand(2, dtype=pr.int32)
    with pytest.raises(NotImplementedError, match="Bool"):  # (torch's class and words)
        pr.arange(5, dtype=pr.bool)
    with pytest.raises(OverflowError, match="int32"):
        pr.randint(0, 2**40, (2,))
    with pytest.raises(RuntimeError, match=r"\[0, 1\]"):
        pr.bernoulli(pr.ones(2), 2.0)


def test_linspace_matches_torch(rng):
    for start, end, steps in [(0, 1, 5), (-2.5, 7.0, 13), (1e3, -3.3, 257), (0.1, 0.7, 2)]:
        got = pr.linspace(start, end, steps).numpy()
        want = torch.linspace(start, end, steps).numpy()
        assert np.array_equal(got, want)  # bit for bit: each element one fused multiply-add


# ---- __setitem__ ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "index, value_shape",
    [
        (0, (1, 4)),
        (0, (1, 1, 4)),
        ((slice(None), 1), (1, 1, 3)),
        (Ellipsis, (1, 3, 4)),
        (slice(0, 2), (1, 2, 4)),
        ((1, slice(None, None, 2)), (1, 2)),
        ([0, 2], (1, 2, 4)),
    ],
)
def test_setitem_drops_leading_ones(index, value_shape, rng):
    v = rng.standard_normal(value_shape).astype(np.float32)
    a, t = pr.zeros(3, 4), torch.zeros(3, 4)
    ti = torch.tensor(index) if isinstance(index, list) else index
    a[index] = pr.tensor(v)
    t[ti] = torch.from_numpy(v)
    np.testing.assert_array_equal(a.numpy(), t.numpy())
    with pytest.raises(ValueError, match="broadcast"):
        a[0] = pr.ones(2, 4)


# ---- PYRITE_DEBUG -----------------------------------------------------------------------------
@pytest.mark.parametrize("value, ok", [("yes", False), ("2", True)])
def test_pyrite_debug_parsing(value, ok):
    env = dict(os.environ, PYRITE_DEBUG=value)
    code = "import pyrite as pr; print(pr.ones(2).sum().item())"
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    if ok:
        assert r.returncode == 0 and "2.0" in r.stdout, r.stderr[-2000:]
    else:
        assert r.returncode != 0
        assert f"PYRITE_DEBUG={value!r}" in r.stderr and "non-negative integer" in r.stderr


# ---- ops/misc.py ------------------------------------------------------------------------------
MISC = [
    "t.hann_window(5)", "t.hann_window(5, periodic=False)", "t.hann_window(1)", "t.hann_window(0)",
    "t.hamming_window(6, True, 0.5, 0.4)", "t.blackman_window(5)", "t.blackman_window(7, False)",
    "t.bartlett_window(5)", "t.bartlett_window(6, periodic=False)", "t.bartlett_window(7)",
    "t.kaiser_window(6)", "t.kaiser_window(5, False, 5.0)", "t.kaiser_window(9, True, 3.0)",
    "t.hann_window(400)",
    "t.ones(2, 3).sum_to_size(1, 3)", "t.ones(2, 3).sum_to_size(3)", "t.ones(2, 3).sum_to_size((2, 1))",
    "t.scalar_tensor(3)", "t.scalar_tensor(3, dtype=t.int32)", "t.fill(t.ones(2), 3)",
    "t.zero_(t.ones(2))", "t.ones(4).resize_(2, 2)", "t.ones(4).resize_(5)[:4]",
    "t.ravel(t.ones(2, 3).t())", "t.arange(6.0).reshape(2, 3).t_()",
    "t.arange(6.0).reshape(2, 3).transpose_(0, 1)", "t.ones(1, 3).squeeze_()",
    "t.ones(3).unsqueeze_(0)",
    # ops/compat.py
    "t.isin(t.tensor([1, 2, 3, 4]), t.tensor([2, 4, 9]))",
    "t.isin(t.tensor([1.0, float('nan'), 3]), t.tensor([float('nan'), 3.0]))",
    "t.isin(t.tensor([1, 2]), 2)", "t.isin(3, t.tensor([1, 3]))",
    "t.isin(t.tensor([1, 2, 3]), t.tensor([2]), invert=True)",
    "t.isin(t.tensor([1, 2, 3]), t.tensor([2.5, 2.0]))",
    "t.isin(t.tensor([[1, 5], [7, 2]]), t.tensor([7, 1, 1, 9]))",
    "t.renorm(t.tensor([[1.0, 2], [3, 4]]), 2, 0, 2.0)", "t.renorm(t.tensor([[1.0, 2], [3, 4]]), 1, 1, 3.0)",
    "t.angle(t.tensor([-1.0, 0, 2, float('nan'), -0.0]))", "t.angle(t.tensor([-1, 0, 2]))",
    "t.tensor([1.0, 2]).real", "t.conj(t.tensor([1.0, 2]))",
    "t.addr(t.zeros(2, 3), t.tensor([1.0, 2]), t.tensor([1.0, 2, 3]), beta=2, alpha=3)",
    "t.frombuffer(bytearray(b'\\x01\\x00\\x00\\x00\\x02\\x00\\x00\\x00'), dtype=t.int32)",
    "t.gradient(t.tensor([1.0, 4, 9, 16, 25]))", "t.gradient(t.tensor([1.0, 4, 9, 16, 25]), spacing=2.0)",
    "t.gradient(t.tensor([[1.0, 2, 4], [2, 5, 9]]), dim=1)", "t.gradient(t.tensor([[1.0, 2, 4], [2, 5, 9]]))",
    "t.gradient(t.tensor([1.0, 4, 9, 16, 25]), spacing=(t.tensor([0.0, 1, 3, 4, 7]),))",
    "t.gradient(t.tensor([1.0, 4, 9, 16, 25]), edge_order=2)",
    "t.gradient(t.tensor([1.0, 4, 9, 16, 25, 3]), spacing=(t.tensor([0.0, 1, 3, 4, 7, 8]),), edge_order=2)",
    "t.gradient(t.tensor([[1.0, 4, 9], [16, 25, 3], [2, 2, 1]]), spacing=[2.0, 3.0], edge_order=2)",
    "t.ones(2).eq_(t.ones(2))", "t.tensor([1, 2]).lt_(2)", "t.tensor([1.0, 2]).logical_and_(t.tensor([0.0, 3]))",
    "t.tensor([0.5]).asin_()", "t.tensor([-2.0]).negative_()", "t.tensor([1.0, 2]).cumsum_(0)",
    "t.relu_(t.tensor([-1.0, 2]))", "t.abs_(t.tensor([-1.0, 2]))", "t.sigmoid_(t.tensor([0.0]))",
    "t.tensor([2.0]).atan2_(t.tensor([1.0]))",
]  # fmt: skip


@pytest.mark.parametrize("case", MISC)
def test_misc_matches_torch(case):
    want = _norm(eval(case, {"t": torch}))
    got = _norm(eval(case, {"t": pr}))
    assert np.shape(got) == np.shape(want)
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6)


def test_misc_predicates_and_knobs():
    assert pr.can_cast(pr.int32, pr.float16) and not pr.can_cast(pr.float32, pr.int32)
    assert not pr.can_cast(pr.int32, pr.bool) and pr.can_cast(pr.bool, pr.int32)
    assert pr.ones(2, 3).is_same_size(pr.zeros(2, 3))
    assert pr.tensor([1.0]).is_nonzero() and not pr.tensor([0.0]).is_nonzero()
    with pytest.raises(RuntimeError, match="ambiguous"):
        pr.tensor([1.0, 2]).is_nonzero()
    assert not pr.tensor([True]).is_signed() and pr.is_signed(pr.tensor([1]))
    assert pr.empty_strided((2, 3), (1, 2)).stride() == (1, 2)
    assert (pr.pi, pr.e, pr.inf, pr.newaxis) == (torch.pi, torch.e, torch.inf, torch.newaxis)
    assert pr.ones(2, 3).contiguous(memory_format=pr.channels_last).shape == (2, 3)
    pr.set_num_threads(1)
    assert pr.get_num_threads() == 1
    pr.set_float32_matmul_precision("high")
    assert pr.get_float32_matmul_precision() == "high"
    with pytest.raises(RuntimeError, match="precision"):
        pr.set_float32_matmul_precision("low")
    pr.set_float32_matmul_precision("highest")
    pr.use_deterministic_algorithms(True)
    assert pr.are_deterministic_algorithms_enabled()
    pr.use_deterministic_algorithms(False)
    x, y = pr.ones(4), pr.ones(4)
    assert x.data_ptr() == x.view(2, 2).data_ptr() != y.data_ptr()
    assert x[1:].data_ptr() == x.data_ptr() + 4


def test_rng_state_and_random_fills():
    pr.manual_seed(3)
    state = pr.get_rng_state()
    a = pr.rand(5).tolist()
    pr.set_rng_state(state)
    assert pr.rand(5).tolist() == a
    n = 20_000
    e = pr.empty(n).exponential_(2.0)
    assert abs(e.mean().item() - 0.5) < 0.03 and e.min().item() >= 0
    g = pr.empty(n).geometric_(0.25)
    assert abs(g.mean().item() - 4.0) < 0.2 and g.min().item() == 1.0
    ln = pr.empty(n).log_normal_(0.0, 0.5).log()
    assert abs(ln.mean().item()) < 0.03 and abs(ln.std().item() - 0.5) < 0.03
    c = pr.empty(n).cauchy_(1.0, 2.0)
    assert abs(c.median().item() - 1.0) < 0.15
    with pytest.raises(RuntimeError, match="lambda > 0"):
        pr.empty(2).exponential_(0)
