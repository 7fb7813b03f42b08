"""Trusted kernels (kernels/common.TRUSTED, built without run-time index clamps on wgpu-native):
the instrumented build (backend/trustcheck.py) catches an out-of-range index, and every trusted
kernel family keeps its claim over random awkward shapes and forced variants, with parity
against torch CPU so the instrumented kernels are also checked to compute the same thing."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import pyrite as pr
from pyrite import backend
from pyrite.backend import device as devmod
from pyrite.backend import trustcheck
from pyrite.kernels import common
from pyrite.nn import _attention
from pyrite.ops import matmul as mmod

F = pr.nn.functional
TF = torch.nn.functional


def test_markers_agree():
    assert common.TRUSTED == devmod.TRUSTED


@pytest.fixture
def checked(monkeypatch):
    """Every trusted kernel built from here on is instrumented; the test fails on a violation."""
    dev = backend.current()
    monkeypatch.setattr(devmod, "CHECK_TRUSTED", True)
    saved = dict(dev._pipelines)
    dev._pipelines.clear()  # (built earlier unchecked: build again, instrumented)
    built = len(dev._checked_sites)
    try:
        yield dev
        bad = dev.trusted_violation()
        assert bad is None, bad
        assert len(dev._checked_sites) > built  # (trusted kernels ran, instrumented)
    finally:
        dev._pipelines.clear()
        dev._pipelines.update(saved)


OOB = common.trusted(
    common.KernelSource(
        common.header([("out", "f32", "w")])
        + "var<workgroup> sh: array<f32, 64>;\n"
        + "@compute @workgroup_size(64)\n"
        + "fn main(@builtin(local_invocation_id) lid: vec3<u32>) {\n"
        + "  sh[lid.x] = f32(lid.x) + 0.5;\n  workgroupBarrier();\n"
        + "  out[lid.x] = sh[i32(lid.x) + info[0]];\n}\n",
        "w",
    )
)


@pytest.mark.parametrize("shift", [0, 1, -3])
def test_checker_catches_an_out_of_range_index(monkeypatch, shift):
    dev = backend.current()
    monkeypatch.setattr(devmod, "CHECK_TRUSTED", True)
    dev._pipelines.pop(OOB.wgsl, None)
    out = dev.pool.allocate(64 * 4)
    try:
        dev.dispatch(OOB, [out.buffer], [shift], (1, 1, 1))
        got = np.frombuffer(dev.read(out.buffer, 0, 256), np.float32)
        bad = dev.trusted_violation()
    finally:
        dev._pipelines.pop(OOB.wgsl, None)
    # the instrumented kernel clamps as the checked build does
    want = np.clip(np.arange(64) + shift, 0, 63) + 0.5
    np.testing.assert_array_equal(got, want)
    if shift == 0:
        assert bad is None
    else:
        assert bad is not None and "sh[i32(lid.x) + info[0]] (size 64)" in bad
        assert dev.trusted_violation() is None  # (read once, cleared)


def test_instrument_rewrites_nested_indices():
    src = (
        common.header([("x", "f32", "r")])
        + "var<workgroup> a: array<i32, 8>;\nvar<workgroup> b: array<vec4<f32>, 4>;\n"
        + "fn main() { let v = b[a[i32(x[0])] + 1].x; }\n"
    )
    out, sites = trustcheck.instrument(src, 1, 3)
    assert sites == ["b[a[i32(x[0])] + 1] (size 4)", "a[i32(x[0])] (size 8)"]
    assert "pyr_chk(i32(a[pyr_chk(i32(i32(x[0])), 8," in out
    assert "x[0]" in out and "pyr_chk(i32(x" not in out  # storage buffers are not rewritten
    assert "@binding(1) var<storage, read_write> pyr_oob" in out
    assert "@binding(2) var<storage, read> info" in out


def _t(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def test_gemm_variants_random_shapes(checked, rng):
    """Every fast tile (forced) and the rules' choice over aligned and awkward shapes, with and
    without bias, batched, x @ w.T and x @ w."""
    from test_matmul import FAST_VARIANTS  # (the tiles the matmul tests force)

    for variant in [None] + FAST_VARIANTS:
        old = mmod.FORCE
        mmod.FORCE = variant
        try:
            for _ in range(2):
                m, n, k = (int(rng.choice([1, 7, 64, 96, 128, 131, 256])) for _ in range(3))
                a, w, b = _t(rng, m, k), _t(rng, n, k), _t(rng, n)
                got = F.linear(pr.tensor(a), pr.tensor(w), pr.tensor(b)).numpy()
                want = a.astype(np.float64) @ w.T.astype(np.float64) + b
                tol = 1e-5 * np.sqrt(k) * (np.abs(a) @ np.abs(w).T + 1)
                assert (np.abs(got - want) <= tol).all(), variant
                x, y = _t(rng, 3, m, k), _t(rng, 3, k, n)
                got = (pr.tensor(x) @ pr.tensor(y)).numpy()
                want = x.astype(np.float64) @ y
                assert np.allclose(got, want, rtol=1e-4, atol=1e-4 * np.sqrt(k)), variant
        finally:
            mmod.FORCE = old


def _sdpa_case(rng, B, H, L, S, E, causal, masked):
    q, k, v = _t(rng, B, H, L, E), _t(rng, B, H, S, E), _t(rng, B, H, S, E)
    g = _t(rng, B, H, L, E)
    keep = rng.random((B, 1, L, S)) > 0.3
    keep[..., 0] = True
    kw_p = {"is_causal": True} if causal else {"attn_mask": pr.tensor(keep)} if masked else {}
    kw_t = {"is_causal": True} if causal else {"attn_mask": torch.tensor(keep)} if masked else {}
    pq, pk, pv = (pr.tensor(a).requires_grad_() for a in (q, k, v))
    o = F.scaled_dot_product_attention(pq, pk, pv, **kw_p)
    grads = pr.autograd.grad(o, (pq, pk, pv), pr.tensor(g))
    tq, tk, tv = (torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (q, k, v))
    to = TF.scaled_dot_product_attention(tq, tk, tv, **kw_t)
    tg = torch.autograd.grad(to, (tq, tk, tv), torch.tensor(g, dtype=torch.float64))
    for got, want in zip((o, *grads), (to, *tg)):
        want = want.detach().numpy()
        assert np.allclose(got.numpy(), want, rtol=2e-3, atol=2e-3 * np.sqrt(S)), (B, H, L, S, E)


@pytest.mark.parametrize(
    "force",
    [
        {},
        {"FORCE_TILED": True, "FORCE_TILED_BWD": True},
        {"FORCE_TILED": True, "FORCE_TILED_RPT": 2, "FORCE_TILED_BWD": True,
         "FORCE_TILED_BWD_TB": 16},
        {"FORCE_TILED": False, "FORCE_TILED_BWD": False, "FORCE_SPLITS": 3},
    ],
)  # fmt: skip
def test_attention_random_shapes(checked, rng, monkeypatch, force):
    for name, val in force.items():
        monkeypatch.setattr(_attention, name, val)
    for i in range(3):
        B, H = int(rng.integers(1, 3)), int(rng.integers(1, 3))
        L, S = int(rng.integers(1, 90)), int(rng.integers(1, 90))
        E = int(rng.choice([8, 16, 24, 32]))
        _sdpa_case(rng, B, H, L, S, E, causal=i == 0 and L <= S, masked=i == 1)


def test_attention_decode_random(checked, rng, monkeypatch):
    monkeypatch.setattr(_attention, "FORCE_DECODE", True)
    for _ in range(2):
        S, E = int(rng.integers(40, 700)), int(rng.choice([16, 64, 80]))
        _sdpa_case(rng, 1, 2, int(rng.integers(1, 3)), S, E, causal=False, masked=True)


def test_row_ops_random_widths(checked, rng):
    for n in (1, 3, 31, 64, 65, 127, 500, 1024, 1537, 4099):
        rows = int(rng.integers(1, 40))
        x = _t(rng, rows, n)
        w, b = _t(rng, n), _t(rng, n)
        px = pr.tensor(x).requires_grad_()
        tx = torch.tensor(x, dtype=torch.float64, requires_grad=True)
        outs = [
            (F.softmax(px, -1), TF.softmax(tx, -1)),
            (F.log_softmax(px, -1), TF.log_softmax(tx, -1)),
            (F.layer_norm(px, (n,), pr.tensor(w), pr.tensor(b)),
             TF.layer_norm(tx, (n,), torch.tensor(w, dtype=torch.float64),
                           torch.tensor(b, dtype=torch.float64))),
            (F.rms_norm(px, (n,)), TF.rms_norm(tx, (n,))),
        ]  # fmt: skip
        g = _t(rng, rows, n)
        for po, to in outs:
            (pg,) = pr.autograd.grad(po, (px,), pr.tensor(g))
            (tg,) = torch.autograd.grad(to, (tx,), torch.tensor(g, dtype=torch.float64))
            assert np.allclose(po.detach().numpy(), to.detach().numpy(), rtol=1e-4, atol=1e-5)
            assert np.allclose(pg.numpy(), tg.numpy(), rtol=1e-3, atol=1e-4 * np.sqrt(n))


def test_reductions_random_shapes(checked, rng):
    for _ in range(6):
        shape = tuple(int(s) for s in rng.integers(2, 70, size=int(rng.integers(1, 4))))
        x = _t(rng, *shape)
        dim = int(rng.integers(0, len(shape)))
        px = pr.tensor(x)
        assert np.allclose(px.sum(dim).numpy(), x.astype(np.float64).sum(dim), atol=1e-4)
        assert np.allclose(px.amax(dim).numpy(), x.max(dim))
        assert np.allclose(px.var(dim).numpy(), x.astype(np.float64).var(dim, ddof=1),
                           rtol=1e-4, atol=1e-5, equal_nan=True)  # fmt: skip
        assert np.isclose(px.sum().item(), x.astype(np.float64).sum(), atol=1e-3)


@pytest.mark.parametrize(
    "impl,backend_type,debug,mode,want",
    [
        ("wgpu", "Vulkan", 0, "1", True),
        ("wgpu", "Metal", 0, "1", False),  # (no driver bounds on storage buffers there)
        ("wgpu", "D3D12", 0, "1", False),
        ("dawn", "Vulkan", 0, "1", False),  # (Dawn has no per-module switch)
        ("wgpu", "Vulkan", 1, "1", False),  # (PYRITE_DEBUG keeps every check)
        ("wgpu", "Vulkan", 0, "0", False),
    ],
)
def test_which_devices_build_trusted(monkeypatch, impl, backend_type, debug, mode, want):
    from types import SimpleNamespace

    monkeypatch.setattr(devmod, "TRUSTED_MODE", mode)
    fake = SimpleNamespace(impl=impl, backend_type=backend_type, debug=debug)
    assert devmod.Device._trusted(fake, OOB.wgsl) is want
    assert devmod.Device._trusted(fake, "fn main() {}") is False or mode == "all"


@pytest.mark.parametrize("bits,gs", [(8, None), (8, 32), (4, 32), (4, 128)])
def test_quantized_gemv_random_shapes(checked, rng, bits, gs):
    """The quantized GEMV (kernels/quant.py, decode's product) over random widths and rows."""
    from test_quantized import _draw, _ref

    from pyrite.quantization import QuantizedWeight, qlinear
    from pyrite.testing.tolerance import assert_close

    for _ in range(2):
        N, M = int(rng.integers(1, 70)), int(rng.integers(1, 9))
        K = int(rng.choice([128, 256, 384]))
        q, sc, off, w = _draw(rng, bits, N, K, gs)
        qw = QuantizedWeight.from_values(q, sc, off, bits=bits, group_size=gs)
        x = rng.standard_normal((M, K)).astype(np.float32)
        y, tol = _ref(x, w)
        assert_close(qlinear(pr.tensor(x), qw), y, atol=tol, msg=f"{bits} bits, {N}x{K}, {M}")


def test_rotary_random_shapes(checked, rng):
    """The rotary fast path (kernels/fastpaths.py) over random shapes, both pairings."""
    from test_fastpaths import _cos_sin, _rot_tol, _t64, _x_view, rotary_ref

    from pyrite.testing.tolerance import assert_close

    for interleaved in (False, True):
        B, T, H = (int(v) for v in rng.integers(1, 6, size=3))
        half = int(rng.choice([4, 8, 16]))
        Dh = 2 * half + int(rng.choice([0, 2]))
        x, xa = _x_view(rng, B, T, H, Dh, "contiguous")
        c, s = _cos_sin(rng, T + 3, half)
        got = F.apply_rotary_emb(x, pr.tensor(c), pr.tensor(s), interleaved, seqlen_offsets=2)
        want = rotary_ref(_t64(xa), _t64(c), _t64(s), interleaved, 2).numpy()
        assert_close(got.numpy(), want, atol=_rot_tol(xa), rtol=0)
