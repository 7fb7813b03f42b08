"""Parity of the fused row ops (softmax, log_softmax, layer_norm, rms_norm) against torch CPU in
float64, through the op table (tests/optable.py).

Tolerances are rounding bounds, with u = 2⁻²⁴ and n the row length:
- softmax: out = exp(x - m) / s. WGSL's exp is within 3 + 2·|x - m| ULP (2u each); s is a sum of
  n terms (n·u relative); the division adds 2.5 ULP. Relative: (3 + 2·max|x - m| + n + 5)·2u,
  absolute floor a few smallest normals (results may flush from subnormal).
- log_softmax: out = x - m - log(s): absolute ≈ 2u·(|x| + |m|) for the subtraction, n·u for the
  sum inside the log, and WGSL's log (2⁻²¹ absolute near 1, else 3 ULP of log(s) ≤ log n).
- layer_norm / rms_norm: a mean over n terms (n·u relative to the mean of |x|), the variance
  likewise, inverseSqrt 2 ULP; the normalised value is then off by ≈ (2n + 8)·u·max|x̂|, times
  |w|, plus b's rounding.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from optable import EPS32, OpInfo, Sample, check_row

import pyrite as pr

TINY = 2.0**-126
HAS_F16 = "shader-f16" in pr.device_info().get("features", ())
DTYPES = ("float32", "float16") if HAS_F16 else ("float32",)


def _t(a):
    return torch.from_numpy(np.asarray(a, dtype=np.float64))


def softmax_tol(dim):
    def tol(inputs, expected):
        x = inputs[0]
        n = x.shape[dim] if x.ndim else 1
        spread = float(np.ptp(x, axis=dim).max(initial=0.0)) if x.ndim and x.size else 0.0
        return 8 * TINY, (3 + 2 * spread + n + 5) * 2 * EPS32

    return tol


def log_softmax_tol(dim):
    def tol(inputs, expected):
        x = inputs[0]
        n = x.shape[dim] if x.ndim else 1
        big = float(np.abs(x).max(initial=0.0))
        return 2 * EPS32 * (2 * big) + n * EPS32 + 2.0**-21 + 6 * EPS32 * math.log(n + 1), 4 * EPS32

    return tol


def norm_tol(k):
    def tol(inputs, expected):
        x = inputs[0]
        n = math.prod(x.shape[x.ndim - k :])
        xhat = np.abs(expected).max(initial=0.0)
        w = float(np.abs(inputs[1]).max(initial=1.0)) if len(inputs) > 1 else 1.0
        return (2 * n + 8) * EPS32 * (xhat + w) + 8 * TINY, 4 * EPS32

    return tol


def _randn(*shapes, scale=1.0):
    return lambda rng: [rng.standard_normal(s) * scale for s in shapes]


# ---- softmax / log_softmax -----------------------------------------------------------------
def softmax_samples(dim_shapes):
    out = []
    for shape in dim_shapes:
        for d in range(-len(shape), len(shape)):
            out.append(Sample(_randn(shape), {"dim": d}, name=f"{shape} dim={d}"))
    return out


SM_SHAPES = [(3, 5, 7), (2, 3, 1, 5)]
ROW_LENGTHS = [1, 7, 255, 257, 4099]


def sm_rows(name, fn, ref, tolf):
    rows = []
    for shape in SM_SHAPES:
        for d in range(-len(shape), len(shape)):
            rows.append(
                OpInfo(
                    f"{name}{shape}d{d}",
                    lambda x, d=d: fn(x, d),
                    lambda x, d=d: ref(_t(x), d).numpy(),
                    [
                        Sample(_randn(shape), name=f"{shape} dim={d}"),
                        Sample(_randn(shape), layout="t", name="transposed"),
                        Sample(_randn(shape), layout="s", name="strided"),
                    ],
                    tol=tolf(d),
                    dtypes=DTYPES,
                )
            )
    long_rows = [Sample(_randn((3, n)), name=f"row {n}") for n in ROW_LENGTHS]
    long_rows += [Sample(_randn((5, n), scale=80.0), name=f"±80 row {n}") for n in (7, 257)]
    long_rows.append(
        Sample(
            lambda rng: [np.repeat(rng.standard_normal((1, 9)), 6, axis=0)],
            layout="e",
            name="expanded",
        )
    )
    rows.append(
        OpInfo(
            f"{name}-rows",
            lambda x: fn(x, -1),
            lambda x: ref(_t(x), -1).numpy(),
            long_rows,
            tol=tolf(-1),
            dtypes=DTYPES,
        )
    )
    # rows over dim 0 of a long column: the strided read walks 4099 elements 3 apart
    rows.append(
        OpInfo(
            f"{name}-column",
            lambda x: fn(x, 0),
            lambda x: ref(_t(x), 0).numpy(),
            [Sample(_randn((4099, 3)), name="column 4099")],
            tol=tolf(0),
        )
    )
    return rows


SOFTMAX_ROWS = sm_rows("softmax", lambda x, d: x.softmax(d), torch.softmax, softmax_tol) + sm_rows(
    "log_softmax", lambda x, d: pr.log_softmax(x, d), torch.log_softmax, log_softmax_tol
)


@pytest.mark.parametrize("row", SOFTMAX_ROWS, ids=lambda r: r.name)
def test_softmax_parity(row, rng):
    check_row(row, rng)


def test_softmax_many_rows_grid_folds(rng):
    """65,537 rows: one workgroup each, so the grid folds past 65,535 in x."""
    x = rng.standard_normal((65537, 3))
    got = pr.tensor(x, dtype=pr.float32).log_softmax(1).numpy()
    want = torch.log_softmax(_t(x.astype(np.float32)), 1).numpy()
    np.testing.assert_allclose(got, want, atol=1e-6, rtol=0)


def test_softmax_extremes_and_infinities():
    x = np.array(
        [
            [80.0, -80.0, 79.0, 0.0],
            [-np.inf, 1.0, -np.inf, 2.0],
            [-np.inf] * 4,
            [np.inf, 0.0, 1.0, 2.0],
            [np.nan, 0.0, 1.0, 2.0],
        ],
        dtype=np.float32,
    )
    for fn in ("softmax", "log_softmax"):
        got = getattr(pr.tensor(x), fn)(-1).numpy()
        want = getattr(torch.from_numpy(x), fn)(-1).numpy()
        np.testing.assert_allclose(got, want, atol=1e-6, rtol=1e-5, equal_nan=True)


def test_softmax_dtype_argument_and_shapes():
    x = pr.arange(12).reshape(3, 4)
    y = pr.softmax(x, -1, dtype=pr.float32)
    assert y.dtype is pr.float32 and y.shape == (3, 4)
    want = torch.softmax(torch.arange(12.0).reshape(3, 4), -1).numpy()
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-6)
    s = pr.tensor(3.0).softmax(0)
    assert s.shape == () and s.item() == 1.0
    e = pr.zeros(0, 5).softmax(-1)
    assert e.shape == (0, 5)


def test_softmax_errors_then_works():
    with pytest.raises(TypeError, match="pyrite: softmax.*int32"):
        pr.softmax(pr.arange(5), 0)
    with pytest.raises(IndexError, match="pyrite: dimension out of range"):
        pr.ones(2, 3).softmax(2)
    np.testing.assert_allclose(pr.ones(2, 4).softmax(-1).numpy(), np.full((2, 4), 0.25))


# ---- layer_norm / rms_norm -----------------------------------------------------------------
def ln_ref(k, with_w, with_b):
    def ref(x, *params):
        params = list(params)
        w = _t(params.pop(0)) if with_w else None
        b = _t(params.pop(0)) if with_b else None
        return TF.layer_norm(_t(x), x.shape[x.ndim - k :], w, b, eps=1e-5).numpy()

    return ref


def ln_op(k, with_w, with_b):
    def op(x, *params):
        params = list(params)
        w = params.pop(0) if with_w else None
        b = params.pop(0) if with_b else None
        return pr.layer_norm(x, x.shape[x.ndim - k :], w, b)

    return op


NORM_SHAPES = {1: [(3, 1), (2, 5, 7), (4, 257), (2, 4099)], 2: [(3, 5, 7), (2, 3, 17, 6)]}


def ln_rows():
    rows = []
    for k, shapes in NORM_SHAPES.items():
        for with_w, with_b in ((False, False), (True, False), (True, True)):
            samples = []
            for shape in shapes:
                ps = [shape[len(shape) - k :]] * (int(with_w) + int(with_b))
                samples.append(Sample(_randn(shape, *ps), name=str(shape)))
                samples.append(
                    Sample(
                        _randn(shape, *ps), layout="t" + "s" * len(ps), name=f"{shape} transposed"
                    )
                )
            np_ = int(with_w) + int(with_b)
            samples.append(
                Sample(
                    lambda rng, s=shapes[1], k=k, np_=np_: (
                        [rng.standard_normal(s) * 30 + 100]
                        + [rng.standard_normal(s[len(s) - k :])] * np_
                    ),
                    name="offset mean 100",
                )
            )
            rows.append(
                OpInfo(
                    f"layer_norm k={k} w={with_w} b={with_b}",
                    ln_op(k, with_w, with_b),
                    ln_ref(k, with_w, with_b),
                    samples,
                    tol=norm_tol(k),
                    dtypes=DTYPES,
                )
            )
    return rows


def rms_rows():
    rows = []
    for k, shapes in NORM_SHAPES.items():
        for with_w in (False, True):
            samples = [
                Sample(_randn(s, *([s[len(s) - k :]] if with_w else [])), name=str(s))
                for s in shapes
            ]
            samples.append(
                Sample(
                    _randn(shapes[-1], *([shapes[-1][-k:]] if with_w else [])),
                    layout="tc",
                    name="transposed",
                )
            )

            def op(x, *w, k=k):
                return pr.rms_norm(x, x.shape[x.ndim - k :], w[0] if w else None, eps=1e-6)

            def ref(x, *w, k=k):
                return TF.rms_norm(
                    _t(x), x.shape[x.ndim - k :], _t(w[0]) if w else None, eps=1e-6
                ).numpy()

            rows.append(
                OpInfo(
                    f"rms_norm k={k} w={with_w}", op, ref, samples, tol=norm_tol(k), dtypes=DTYPES
                )
            )
    return rows


@pytest.mark.parametrize("row", ln_rows() + rms_rows(), ids=lambda r: r.name)
def test_norm_parity(row, rng):
    check_row(row, rng)


@pytest.mark.parametrize("dtype", DTYPES)
def test_rms_norm_default_eps_is_finfo_eps(dtype, rng):
    """rms_norm(eps=None) uses torch's default: finfo(float32).eps, the computing type's, also
    for float16 input (torch 2.13; not finfo(float16).eps)."""
    x = (rng.standard_normal((4, 9)) * 1e-3).astype(dtype)
    got = pr.rms_norm(pr.tensor(x), (9,)).numpy().astype(np.float64)
    want = TF.rms_norm(_t(x), (9,), eps=torch.finfo(torch.float32).eps).numpy()  # (in f64)
    u = 2.0**-11 if dtype == "float16" else EPS32
    np.testing.assert_allclose(got, want, atol=8 * u, rtol=8 * u)
    torch_default = TF.rms_norm(torch.from_numpy(x), (9,)).double().numpy()  # in x's dtype
    np.testing.assert_allclose(torch_default, want, atol=8 * u, rtol=8 * u)


def test_norm_errors_then_works():
    x = pr.ones(2, 3)
    with pytest.raises(pr.ShapeError, match=r"pyrite: layer_norm: given normalized_shape=\[4\]"):
        pr.layer_norm(x, (4,))
    with pytest.raises(pr.ShapeError, match="pyrite: rms_norm: weight of shape"):
        pr.rms_norm(x, (3,), pr.ones(2))
    with pytest.raises(TypeError, match="pyrite: layer_norm.*int32"):
        pr.layer_norm(pr.arange(6).reshape(2, 3), (3,))
    np.testing.assert_allclose(
        pr.layer_norm(pr.arange(6.0).reshape(2, 3), 3).numpy(),
        TF.layer_norm(torch.arange(6.0).reshape(2, 3), (3,)).numpy(),
        atol=1e-6,
    )


@pytest.mark.parametrize(
    "row",
    [r for r in SOFTMAX_ROWS if r.name.endswith("-rows")] + ln_rows()[:2],
    ids=lambda r: r.name,
)
def test_gpu_workgroup_rule(row, rng, monkeypatch):
    """The rows again with the GPU's invocations a row (kernels/rowops.workgroup_size(n, gpu):
    up to 256 invocations, ~4 elements each), whatever device runs the suite."""
    from pyrite.kernels.rowops import workgroup_size
    from pyrite.ops import rowops

    monkeypatch.setattr(rowops, "_wg", lambda n: workgroup_size(n, True))
    check_row(row, rng)


def test_gpu_workgroup_rule_layer_norm_backward(rng, monkeypatch):
    """layer_norm's fused backward with the GPU rule, against torch float64: three passes over
    the row, each within the forward's bound ((2n + 8)·u of the largest term), so (6n + 24)·u."""
    from pyrite.kernels.rowops import workgroup_size
    from pyrite.ops import rowops

    monkeypatch.setattr(rowops, "_wg", lambda n: workgroup_size(n, True))
    n = 769
    x = rng.standard_normal((5, n)).astype(np.float32)
    w = rng.standard_normal(n).astype(np.float32)
    g = rng.standard_normal((5, n)).astype(np.float32)
    px, pw = pr.tensor(x, requires_grad=True), pr.tensor(w, requires_grad=True)
    (pr.nn.functional.layer_norm(px, (n,), pw) * pr.tensor(g)).sum().backward()
    tx, tw = _t(x).requires_grad_(), _t(w).requires_grad_()
    (TF.layer_norm(tx, (n,), tw) * _t(g)).sum().backward()
    for got, want in ((px.grad, tx.grad), (pw.grad, tw.grad)):
        want = want.numpy()
        tol = (6 * n + 24) * EPS32 * np.abs(want).max()
        assert np.abs(got.numpy() - want).max() <= tol


@pytest.mark.parametrize("row", SOFTMAX_ROWS + ln_rows() + rms_rows(), ids=lambda r: r.name)
def test_rows_streamed(row, rng, monkeypatch):
    """The rows again through the streaming kernel (two passes over each row), which rows of
    more than HELD_MAX elements an invocation take; the others hold their row in registers."""
    from pyrite.ops import rowops

    monkeypatch.setattr(rowops, "HELD", False)
    check_row(row, rng)


@pytest.fixture
def gpu_rules(monkeypatch):
    """Plan rows as on a GPU adapter (several rows a workgroup, kernels/rowops.workgroup_size's
    GPU rule), whatever device runs the suite."""
    from pyrite import backend

    monkeypatch.setattr(backend.current(), "adapter_type", "DiscreteGPU")


@pytest.mark.parametrize("row", SOFTMAX_ROWS + ln_rows() + rms_rows(), ids=lambda r: r.name)
def test_rows_with_the_gpu_plan(row, rng, gpu_rules):
    """The rows again as a GPU runs them: held rows several to a workgroup of 256 (32 lanes a
    row of up to 256 elements: 8 rows a workgroup), longer ones streamed by 256 invocations."""
    check_row(row, rng)


@pytest.mark.parametrize("n", [100, 768, 2049, 4097])
def test_held_row_limit_with_the_gpu_rule(n, rng, gpu_rules):
    """With the GPU plan, rows of 100 (32 lanes, 8 rows a workgroup), 768 (128 lanes, 2 rows)
    and 2049 (256 lanes of 9) are held and 4097 streams; five rows (not a multiple of the rows a
    workgroup takes); softmax, log_softmax, layer_norm and rms_norm agree with torch float64, a
    NaN, a +inf and a -inf row included (torch's NaN rows)."""
    from pyrite.ops import rowops

    lanes = rowops._held_shape(n, rowops._wg(n))
    assert (lanes is None) == (n == 4097)
    a = rng.standard_normal((5, n)).astype(np.float32) * 4
    a[1, 7], a[2, n - 1], a[3, :] = np.nan, np.inf, -np.inf
    a[4, 0] = -np.inf
    x, t = pr.tensor(a), _t(a)
    tol = dict(rtol=(n + 40) * 2 * 2.0**-24, atol=1e-6, equal_nan=True)
    np.testing.assert_allclose(x.softmax(-1).numpy(), t.softmax(-1).numpy(), **tol)
    fin = a[[0, 4]]
    np.testing.assert_allclose(
        pr.tensor(fin).log_softmax(-1).numpy(),
        _t(fin).log_softmax(-1).numpy(),
        rtol=1e-5,
        atol=1e-5,
    )
    assert np.isnan(x.log_softmax(-1).numpy()[1:4]).all()
    b = rng.standard_normal((3, n)).astype(np.float32) + 3
    w = rng.standard_normal(n).astype(np.float32)
    got = pr.nn.functional.layer_norm(pr.tensor(b), (n,), pr.tensor(w)).numpy()
    np.testing.assert_allclose(
        got,
        TF.layer_norm(_t(b), (n,), _t(w)).numpy(),
        atol=(2 * n + 8) * 2.0**-24 * 8 * np.abs(w).max(),
    )
    got = pr.nn.functional.rms_norm(pr.tensor(b), (n,), pr.tensor(w)).numpy()
    np.testing.assert_allclose(
        got,
        TF.rms_norm(_t(b), (n,), _t(w)).numpy(),
        atol=(2 * n + 8) * 2.0**-24 * 8 * np.abs(w).max(),
    )


# ---- subgroup reductions (kernels/rowops._sg_reduce) ---------------------------------------------
@pytest.fixture
def tree_only(monkeypatch):
    """Held rows reduced by the workgroup-memory tree, not subgroup operations."""
    from pyrite.ops import rowops

    monkeypatch.setattr(rowops, "SUBGROUPS", False)


@pytest.mark.parametrize("row", SOFTMAX_ROWS + ln_rows() + rms_rows(), ids=lambda r: r.name)
def test_rows_with_the_gpu_plan_tree(row, rng, gpu_rules, tree_only):
    """The rows as a GPU plans them, reduced by the tree (the other tests take subgroup
    operations where the suite's device has them, as lavapipe does)."""
    check_row(row, rng)


def _special_rows(rng, n):
    a = rng.standard_normal((7, n)).astype(np.float32) * 4
    a[1, min(7, n - 1)], a[2, n - 1], a[3, :] = np.nan, np.inf, -np.inf
    a[4, 0] = -np.inf
    return a


@pytest.mark.parametrize(
    "lanes,n",
    [(k, n) for k in (1, 2, 4, 8, 16, 64, 256) for n in (1, 5, 30, 61) if -(-n // k) <= 16],
)  # (16: kernels/rowops.HELD_MAX, the most elements a lane holds)
def test_held_rows_of_any_lanes(lanes, n, rng, monkeypatch):
    """Held rows of 1 .. 256 lanes, 256 // lanes rows a workgroup: rows narrower than a
    subgroup (lavapipe's is 8 lanes), as wide, and several subgroups a row, so every branch of
    the subgroup reduction (the butterfly's span, one slot a subgroup, the merge of slots) runs;
    softmax with NaN / +inf / all -inf rows, log_softmax, layer_norm and rms_norm against torch
    float64, with subgroup operations and with the tree."""
    from pyrite.ops import rowops

    assert -(-n // lanes) <= rowops.HELD_MAX
    monkeypatch.setattr(rowops, "SUBGROUP_MAX_LANES", 256)  # (the rule keeps 64 and fewer)
    monkeypatch.setattr(
        rowops, "_held_shape", lambda n_, wg: (lanes, -(-n_ // lanes), 256 // lanes)
    )
    a = _special_rows(rng, n)
    b = rng.standard_normal((9, n)).astype(np.float32) + 2
    w = rng.standard_normal(n).astype(np.float32)
    tol = dict(rtol=(n + 40) * 2 * 2.0**-24, atol=1e-6, equal_nan=True)
    ln_tol = (2 * n + 8) * 2.0**-24 * 8 * np.abs(w).max() + 1e-6
    for sg in (True, False):
        monkeypatch.setattr(rowops, "SUBGROUPS", sg)
        np.testing.assert_allclose(
            pr.tensor(a).softmax(-1).numpy(), _t(a).softmax(-1).numpy(), **tol
        )
        fin = a[[0, 5, 6]]
        np.testing.assert_allclose(
            pr.tensor(fin).log_softmax(-1).numpy(),
            _t(fin).log_softmax(-1).numpy(),
            rtol=1e-5,
            atol=1e-5,
        )
        got = pr.nn.functional.layer_norm(pr.tensor(b), (n,), pr.tensor(w)).numpy()
        np.testing.assert_allclose(got, TF.layer_norm(_t(b), (n,), _t(w)).numpy(), atol=ln_tol)
        # (eps given: torch's default for a float64 oracle is float64's)
        got = pr.nn.functional.rms_norm(pr.tensor(b), (n,), pr.tensor(w), eps=1e-6).numpy()
        want = TF.rms_norm(_t(b), (n,), _t(w), eps=1e-6).numpy()
        np.testing.assert_allclose(got, want, atol=ln_tol)


def test_subgroup_kernel_text_and_probe(monkeypatch):
    """The held-row kernel with subgroups spells the entry's subgroup size and the shuffles,
    with Dawn's `enable subgroups;` only where asked (naga refuses it); without, the tree. The
    device's probe gives 0, 1 or 2 as its feature allows, and PYRITE_SUBGROUPS=0 turns it off."""
    from pyrite import backend
    from pyrite.backend import quirks
    from pyrite.kernels.rowops import row_kernel

    k0 = row_kernel("softmax", 64, 1, "f32", "f32", per=4, groups=4).wgsl
    k1 = row_kernel("softmax", 64, 1, "f32", "f32", per=4, groups=4, subgroups=1).wgsl
    k2 = row_kernel("layer_norm", 64, 1, "f32", "f32", per=4, groups=4, subgroups=2).wgsl
    assert "subgroup" not in k0 and "workgroupBarrier" in k0
    assert "subgroupShuffleXor" in k1 and "subgroup_size" in k1 and "enable subgroups" not in k1
    assert k1.count("workgroupBarrier") == 1
    assert k2.startswith("enable subgroups;") and "subgroupShuffleXor" in k2
    k3 = row_kernel("rms_norm", 256, 1, "f32", "f32", per=4, groups=1, subgroups=2).wgsl
    assert "subgroupShuffleXor(rq, 64u)" in k3 and "128u)" not in k3  # (Tint: masks < 128)
    dev = backend.current()
    assert dev.subgroups in (0, 1, 2)
    if dev.subgroup_feature is None:
        assert dev.subgroups == 0
    else:
        assert dev.subgroups == (
            0 if not quirks.subgroup_size(dev) else 2 if dev.subgroup_feature == "subgroups" else 1
        )
    monkeypatch.setenv("PYRITE_SUBGROUPS", "0")
    assert quirks.subgroup_size(dev) == 0


@pytest.mark.parametrize("n", [64, 768, 3000])
@pytest.mark.parametrize("held", [True, False], ids=["held", "streamed"])
def test_layer_norm_of_rows_far_from_zero(n, held, rng, monkeypatch):
    """Rows sitting at 1e4 (spread 1): the statistics are of x - the row's first element, so the
    normalised values keep float64's to a few f32 ulps of 1 (summed raw, 1e4's rounding entered
    the mean and every deviation: torch CPU's own f32 result is ~1e-3 off here)."""
    from pyrite.ops import rowops

    monkeypatch.setattr(rowops, "HELD", held)
    x = (rng.standard_normal((5, n)) + 1e4).astype(np.float32)
    x64 = x.astype(np.float64)
    ref = (x64 - x64.mean(1, keepdims=True)) / np.sqrt(x64.var(1, keepdims=True) + 1e-5)
    got = pr.nn.functional.layer_norm(pr.tensor(x), (n,)).numpy()
    assert np.abs(got - ref).max() <= 16 * 2.0**-24 * max(8.0, np.abs(ref).max())


@pytest.mark.parametrize("gpu", [False, True], ids=["device-plan", "gpu-plan"])
@pytest.mark.parametrize("n", [4, 12, 100, 768, 1020, 2052])
def test_held_rows_as_vec4(n, gpu, rng, monkeypatch):
    """With HELD_VEC4 (off by default: measured no faster), f32 rows of a multiple of 4
    elements, each starting at a multiple of 4, are read and written as vec4s, a lane's elements rounded up to whole vec4s (768:
    128 lanes of 6 become 2 vec4s, lanes past the row idle); rows starting elsewhere (a column
    slice) or of another length take the scalar loads: both agree with torch, for softmax,
    log_softmax, layer_norm (a row far from 0: its shift is the row's first element) and
    rms_norm, five rows (not a multiple of the rows a workgroup takes). (The column slice's
    rows start at 1 + k·(n + 1).)"""
    from pyrite.kernels import rowops as KR
    from pyrite.ops import rowops

    monkeypatch.setattr(rowops, "HELD_VEC4", True)
    if gpu:
        monkeypatch.setattr(pr.backend.current(), "adapter_type", "DiscreteGPU")
    seen = []
    real = KR.row_kernel
    monkeypatch.setattr(
        rowops,
        "row_kernel",
        lambda *a, **k: seen.append(a[-1] if len(a) > 10 else 1) or real(*a, **k),
    )
    a = rng.standard_normal((5, n + 1)).astype(np.float32) * 3
    a[2] += 1e3
    w, b = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
    F = pr.nn.functional
    held = rowops._held_shape(n, rowops._wg(n)) is not None  # (else streamed: scalar loads)
    for cols, vec in ((slice(0, n), 4 if held else 1), (slice(1, n + 1), 1)):
        xa = np.ascontiguousarray(a[:, cols]) if vec == 4 else a[:, cols]
        x = pr.tensor(xa) if vec == 4 else pr.tensor(a)[:, cols]
        t = _t(np.ascontiguousarray(a[:, cols]))
        seen.clear()
        tol = dict(rtol=(n + 40) * 2 * 2.0**-24, atol=1e-6)
        np.testing.assert_allclose(x.softmax(-1).numpy(), t.softmax(-1).numpy(), **tol)
        np.testing.assert_allclose(
            x.log_softmax(-1).numpy(), t.log_softmax(-1).numpy(), rtol=1e-5, atol=1e-4
        )
        got = F.layer_norm(x, (n,), pr.tensor(w), pr.tensor(b)).numpy()
        want = TF.layer_norm(t, (n,), _t(w), _t(b)).numpy()
        np.testing.assert_allclose(got, want, atol=(2 * n + 8) * 2.0**-24 * 64 * np.abs(w).max())
        got = F.rms_norm(x, (n,), pr.tensor(w)).numpy()
        want = TF.rms_norm(t, (n,), _t(w)).numpy()
        np.testing.assert_allclose(got, want, rtol=(n + 8) * 2.0**-23, atol=1e-6)
        assert seen and set(seen) == {vec}, seen
