"""Small-M products (issue 9): the GEMV kernel, split-K, the GPU rule that picks them, and
`linear` folding leading dims into rows. Each case is compared with numpy float64 on fresh
random inputs of awkward sizes, within the dot-product bound K * 2^-24 * (|a| @ |b|) (times a
small factor for the split's extra rounding of S partial sums)."""

from __future__ import annotations

import numpy as np
import pytest

import pyrite as pr
import pyrite.ops.matmul as mm
from pyrite import backend
from pyrite.ops import core

F = pr.nn.functional


def _check(got, a, b, bias=None, alpha=1.0, beta=1.0, factor=2.0):
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    ref = alpha * (a64 @ b64)
    bound = abs(alpha) * (np.abs(a64) @ np.abs(b64))
    if bias is not None:
        ref = ref + beta * bias
        bound = bound + abs(beta) * np.abs(bias)
    k = a.shape[-1]
    tol = factor * (k + 2) * 2.0**-24 * bound + 1e-30
    err = np.abs(got.astype(np.float64) - ref)
    assert (err <= tol).all(), f"worst error {float((err / tol).max()):.2f}x the bound"


def _check_f16(got, a, b, bias=None, chunks=False):
    """An f16 product with f32 sums: the f32 dot-product bound plus the f16 output's rounding
    (2^-11 of the result); `chunks`: K summed in f16-rounded partials, each rounded once more
    (2^-10 of the bound in all)."""
    assert got.dtype is pr.float16
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    ref, bound = a64 @ b64, np.abs(a64) @ np.abs(b64)
    if bias is not None:
        ref, bound = ref + bias, bound + np.abs(bias)
    tol = 2 * (a.shape[-1] + 2) * 2.0**-24 * bound + 2.0**-24
    tol = tol + (2.0**-10 * bound if chunks else 2.0**-11 * np.abs(ref))
    err = np.abs(got.numpy().astype(np.float64) - ref)
    assert (err <= tol).all(), f"worst error {float((err / tol).max()):.2f}x the bound"


@pytest.fixture
def forced():
    yield
    mm.FORCE = mm.FORCE_SPLIT = None


@pytest.fixture
def as_gpu(monkeypatch):
    """Plan as on a GPU adapter (the small-shape rule applies only there)."""
    dev = backend.current()
    monkeypatch.setattr(dev, "adapter_type", "DiscreteGPU")
    mm._plans.clear()
    yield
    mm._plans.clear()


@pytest.mark.parametrize("m", [1, 2, 3, 5, 8])
@pytest.mark.parametrize("k", [64, 130, 771])
@pytest.mark.parametrize("sg", [True, False], ids=["subgroups", "tree"])
def test_gemv_linear_parity(m, k, sg, rng, forced, monkeypatch):
    """The GEMV on aligned and unaligned K, its lanes summed by subgroup operations (where the
    device has them) and by the workgroup-memory tree."""
    monkeypatch.setattr(mm, "GEMV_SUBGROUPS", sg)
    n = 97
    x = rng.standard_normal((m, k)).astype(np.float32)
    w = rng.standard_normal((n, k)).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    rm = 1 if m == 1 else 2 if m == 2 else 4 if m <= 4 else 8
    for vec in (1, 4):
        mm.FORCE = ("gemv", (rm, vec))
        got = F.linear(pr.tensor(x), pr.tensor(w), pr.tensor(b)).numpy()
        assert mm.LAST[0] == "gemv"
        want_vec = 4 if k % 4 == 0 else 1  # unaligned K takes the scalar loads
        assert mm.LAST[1] == (rm, min(vec, want_vec), "f32")
        _check(got, x, w.T, b)
        got = (pr.tensor(x) @ pr.tensor(w).T).numpy()
        _check(got, x, w.T)


def test_gemv_batched_and_rows_below_the_baked_count(rng, forced):
    x = rng.standard_normal((3, 2, 200)).astype(np.float32)  # 2 rows of a baked 8
    w = rng.standard_normal((45, 200)).astype(np.float32)
    mm.FORCE = ("gemv", (8, 4))
    got = (pr.tensor(x) @ pr.tensor(w).T).numpy()
    assert mm.LAST == ("gemv", (8, 4, "f32"))
    _check(got, x, w.T)


def test_gemv_takes_only_k_contiguous_operands(rng, forced):
    x = rng.standard_normal((4, 96)).astype(np.float32)
    w = rng.standard_normal((96, 33)).astype(np.float32)  # x @ w: B's unit stride is N
    mm.FORCE = ("gemv", (4, 4))
    got = (pr.tensor(x) @ pr.tensor(w)).numpy()
    assert mm.LAST[0] != "gemv"
    _check(got, x, w)


@pytest.mark.parametrize(
    "variant",
    [("fast", (32, 32, 4, 4, 16, True)), ("fast", (64, 64, 4, 4, 16, True)), ("tiled", None)],
)
@pytest.mark.parametrize("S", [2, 4, 8])
def test_split_k_parity(variant, S, rng, forced):
    m, k, n = 128, 1024, 192
    x = rng.standard_normal((m, k)).astype(np.float32)
    w = rng.standard_normal((n, k)).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    mm.FORCE_SPLIT = (S, variant)
    got = F.linear(pr.tensor(x), pr.tensor(w), pr.tensor(b)).numpy()
    assert mm.LAST == variant
    _check(got, x, w.T, b)
    got = (pr.tensor(x) @ pr.tensor(w).T).numpy()
    _check(got, x, w.T)
    # alpha and beta go through the sum's axpby epilogue; alpha alone scales after it
    e = rng.standard_normal((m, n)).astype(np.float32)
    got = pr.addmm(pr.tensor(e), pr.tensor(x), pr.tensor(w).T, beta=0.5, alpha=-1.5).numpy()
    _check(got, x, w.T, e, alpha=-1.5, beta=0.5)


def test_split_k_with_offset_operands_and_output_rows(rng, forced):
    base = rng.standard_normal((70, 516)).astype(np.float32)
    x = pr.tensor(base)[6:70, 4:516]  # offset rows and columns, K = 512
    w = rng.standard_normal((64, 512)).astype(np.float32)
    mm.FORCE_SPLIT = (4, ("fast", (32, 32, 4, 4, 16, True)))
    got = (x @ pr.tensor(w).T).numpy()
    _check(got, base[6:70, 4:516], w.T)


def test_split_k_that_does_not_fit_takes_the_rule(rng, forced):
    x = rng.standard_normal((64, 100)).astype(np.float32)  # K = 100 not divisible by 8
    w = rng.standard_normal((64, 100)).astype(np.float32)
    mm.FORCE_SPLIT = (8, ("fast", (32, 32, 4, 4, 16, True)))
    got = (pr.tensor(x) @ pr.tensor(w).T).numpy()
    _check(got, x, w.T)


def test_gpu_rule_picks_gemv_split_and_small_tiles(rng, as_gpu):
    cases = [
        ((1, 768), 256, "gemv", None),
        ((7, 256), 96, "gemv", None),
        ((128, 768), 256, "fast", mm.KG_TILE),  # (K groups: few tiles, K >= KG_MIN_K)
        ((256, 768), 1024, "fast", mm.KG2_TILE),  # (from KG2_MIN_OUTPUTS: the deep prefetch)
        ((128, 512), 256, "fast", (64, 64, 4, 4, 16, True)),
        ((96, 512), 64, "fast", (32, 32, 4, 4, 16, True)),
    ]
    for (m, k), n, kind, params in cases:
        x = rng.standard_normal((m, k)).astype(np.float32)
        w = rng.standard_normal((n, k)).astype(np.float32)
        b = rng.standard_normal(n).astype(np.float32)
        got = F.linear(pr.tensor(x), pr.tensor(w), pr.tensor(b)).numpy()
        assert mm.LAST[0] == kind and (params is None or mm.LAST[1] == params), mm.LAST
        _check(got, x, w.T, b)
        # the plan is cached: the second call runs it again (the split's two dispatches too)
        got = F.linear(pr.tensor(x), pr.tensor(w), pr.tensor(b)).numpy()
        _check(got, x, w.T, b)


def test_gpu_rule_splits_k_when_tiles_are_few(as_gpu):
    dev = backend.current()
    a, w = pr.randn(128, 3072), pr.randn(768, 3072)
    lay = mm._fast_layout(a, w.T, None, pr.float32, [(), (), ()])
    assert mm._choose(dev, 128, 768, 3072, 1, lay) == ("fast", mm.KG_TILE)
    # the K-group tile's 96 workgroups need no split; the 64x64 tile's 24 take one
    split = mm._choose_split(dev, a, w.T, 128, 768, 3072, 1, lay, pr.float32, ("fast", mm.KG_TILE))
    assert split is None
    chosen = ("fast", (64, 64, 4, 4, 16, True))
    assert mm._choose_split(dev, a, w.T, 128, 768, 3072, 1, lay, pr.float32, chosen) == (
        4,
        chosen,
    )  # 24 tiles -> 96 workgroups
    a = pr.randn(512, 3072)
    chosen = mm._choose(dev, 512, 768, 3072, 1, lay)
    assert mm._choose_split(dev, a, w.T, 512, 768, 3072, 1, lay, pr.float32, chosen) is None
    a, w = pr.randn(128, 768), pr.randn(768, 768)  # a short K is not worth a second dispatch
    chosen = mm._choose(dev, 128, 768, 768, 1, lay)
    assert mm._choose_split(dev, a, w.T, 128, 768, 768, 1, lay, pr.float32, chosen) is None


def test_linear_folds_leading_dims_into_rows(rng):
    x = rng.standard_normal((3, 5, 40)).astype(np.float32)
    w = rng.standard_normal((24, 40)).astype(np.float32)
    b = rng.standard_normal(24).astype(np.float32)
    t = pr.tensor(x)
    got = F.linear(t, pr.tensor(w), pr.tensor(b))
    assert got.shape == (3, 5, 24) and got.is_contiguous()
    _check(got.numpy(), x, w.T, b)
    # a leading dim that does not step evenly (a transposed view) keeps the batched product
    tv = t.transpose(0, 1)
    got = F.linear(tv, pr.tensor(w), pr.tensor(b))
    assert got.shape == (5, 3, 24)
    _check(got.numpy(), x.transpose(1, 0, 2), w.T, b)
    # a 2-D bias broadcast over the rows keeps the batched product as well
    b2 = rng.standard_normal((5, 24)).astype(np.float32)
    got = F.linear(t, pr.tensor(w), pr.tensor(b2)).numpy()
    np.testing.assert_allclose(got, x @ w.T + b2, rtol=1e-4, atol=1e-4)


def test_linear_folded_rows_backward(rng):
    x = pr.tensor(rng.standard_normal((2, 3, 16)).astype(np.float32), requires_grad=True)
    w = pr.tensor(rng.standard_normal((8, 16)).astype(np.float32), requires_grad=True)
    b = pr.tensor(rng.standard_normal(8).astype(np.float32), requires_grad=True)
    g = rng.standard_normal((2, 3, 8)).astype(np.float32)
    F.linear(x, w, b).backward(pr.tensor(g))
    xn, wn = x.detach().numpy(), w.detach().numpy()
    np.testing.assert_allclose(x.grad.numpy(), g @ wn, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(
        w.grad.numpy(), g.reshape(-1, 8).T @ xn.reshape(-1, 16), rtol=1e-4, atol=1e-4
    )
    np.testing.assert_allclose(b.grad.numpy(), g.sum((0, 1)), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("m", [17, 77, 100, 130, 200])
def test_gpu_rule_ragged_rows_run_as_an_aligned_product_and_a_remainder(m, rng, as_gpu):
    k, n = 256, 192
    x = rng.standard_normal((m, k)).astype(np.float32)
    w = rng.standard_normal((n, k)).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    e = rng.standard_normal((m, n)).astype(np.float32)
    for _ in range(2):  # planned, then from the plan cache
        got = F.linear(pr.tensor(x), pr.tensor(w), pr.tensor(b))
        assert got.shape == (m, n) and got.is_contiguous()
        _check(got.numpy(), x, w.T, b)
        _check((pr.tensor(x) @ pr.tensor(w).T).numpy(), x, w.T)
        got = pr.addmm(pr.tensor(e), pr.tensor(x), pr.tensor(w).T, beta=0.25, alpha=-2.0)
        _check(got.numpy(), x, w.T, e, alpha=-2.0, beta=0.25)
        got = pr.addmm(pr.tensor(e), pr.tensor(x), pr.tensor(w).T, beta=0, alpha=3.0)
        _check(got.numpy(), x, w.T, alpha=3.0)
    key = next(k_ for k_, p in mm._plans.items() if p[0] == "ragged")
    assert key[0] == (m, k)


@pytest.mark.parametrize("m", [1, 2, 3, 5, 8])
@pytest.mark.parametrize("k", [64, 130, 771])
def test_gemv_cols_parity(m, k, rng, forced):
    """x @ w with w (K, N) row-major (GPT-2's Conv1D layout): `gemv_cols`."""
    n = 100
    x = rng.standard_normal((m, k)).astype(np.float32)
    w = rng.standard_normal((k, n)).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    rm = 1 if m == 1 else 2 if m == 2 else 4 if m <= 4 else 8
    mm.FORCE = ("gemvn", (rm,))
    got = (pr.tensor(x) @ pr.tensor(w)).numpy()
    assert mm.LAST == ("gemvn", (rm, "f32"))
    _check(got, x, w)
    got = pr.addmm(pr.tensor(b), pr.tensor(x), pr.tensor(w)).numpy()
    _check(got, x, w, b)
    xt = pr.tensor(np.ascontiguousarray(x.T)).T  # A read through a non-unit K stride
    _check((xt @ pr.tensor(w)).numpy(), x, w)
    xb = rng.standard_normal((3, m, k)).astype(np.float32)
    got = (pr.tensor(xb) @ pr.tensor(w)).numpy()
    assert mm.LAST == ("gemvn", (rm, "f32"))
    _check(got, xb, w)


def test_gemv_cols_needs_aligned_columns(rng, forced):
    x = rng.standard_normal((2, 64)).astype(np.float32)
    w = rng.standard_normal((64, 30)).astype(np.float32)  # N not a multiple of 4
    mm.FORCE = ("gemvn", (2,))
    got = (pr.tensor(x) @ pr.tensor(w)).numpy()
    assert mm.LAST[0] != "gemvn"
    _check(got, x, w)


def test_gpu_rule_picks_gemv_cols_for_x_at_w(rng, as_gpu):
    for m in (1, 6, 100):
        x = rng.standard_normal((m, 256)).astype(np.float32)
        w = rng.standard_normal((256, 128)).astype(np.float32)
        b = rng.standard_normal(128).astype(np.float32)
        got = pr.addmm(pr.tensor(b), pr.tensor(x), pr.tensor(w)).numpy()
        assert mm.LAST[0] == "gemvn"  # (m = 100: the 4 rows past the aligned 96)
        _check(got, x, w, b)


@pytest.mark.parametrize("force", [("gemv", (4, 4)), ("gemv", (4, 1)), ("gemvn", (4,))])
def test_gemv_past_the_loop_budget_splits_k(force, rng, forced, loop_budget):
    """A GEMV whose K loop would pass the device's loop budget (lavapipe: 65,535 iterations an
    invocation) runs in K-chunks that fit, with the same result."""
    loop_budget(40)
    m, k, n = 3, 6400, 36  # gemv vec4: 51 iterations, scalar: 201, gemv_cols: 201
    x = rng.standard_normal((m, k)).astype(np.float32)
    w = rng.standard_normal((n, k)).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    assert mm.k_loop_iterations(force[0], force[1], k) > 40
    mm.FORCE = force
    mm._plans.clear()
    if force[0] == "gemv":
        got = F.linear(pr.tensor(x), pr.tensor(w), pr.tensor(b)).numpy()
    else:
        got = pr.addmm(pr.tensor(b), pr.tensor(x), pr.tensor(np.ascontiguousarray(w.T))).numpy()
    assert mm.LAST[0] == force[0] and mm.LAST[1][: len(force[1])] == force[1]
    assert any(p[0] == "split" for p in mm._plans.values())
    for chunk in (p[1] for p in mm._plans.values() if p[0] == "split"):
        assert mm.k_loop_iterations(force[0], force[1], chunk) <= 40
    _check(got, x, w.T, b)


@pytest.mark.parametrize(
    "rows,fin,fout", [(512, 128, 384), (64, 32, 32), (256, 128, 96), (4096, 64, 128), (96, 8, 4)]
)
def test_linear_bias_grad_rides_in_the_weight_grad_kernel(rows, fin, fout, rng, as_gpu):
    """The bias gradient (g's column sums) comes from the weight gradient's product, which adds
    up the rows of g^T it reads anyway (gemm `rows`): no kernel of its own where that product
    runs the fast tile (split or not); elsewhere (fout = 4 runs another kernel) the usual sum.
    Both gradients within the dot-product bound of float64's."""
    x = rng.standard_normal((rows, fin)).astype(np.float32)
    g = rng.standard_normal((rows, fout)).astype(np.float32)
    w = pr.tensor(rng.standard_normal((fout, fin)).astype(np.float32), requires_grad=True)
    b = pr.tensor(rng.standard_normal(fout).astype(np.float32), requires_grad=True)
    xt, gt = pr.tensor(x), pr.tensor(g)
    dev = backend.current()
    y = F.linear(xt, w, b)
    poison = core.POISON
    core.set_poison(False)  # (the suite's NaN fills of new tensors are kernels too)
    try:
        pr.synchronize()
        d0 = dev.dispatches
        y.backward(gt)
        pr.synchronize()
        used = dev.dispatches - d0
        d0 = dev.dispatches
        with pr.no_grad():
            mm.gemm(gt.mT, xt)  # the weight gradient's product alone
        pr.synchronize()
        alone = dev.dispatches - d0
    finally:
        core.set_poison(poison)
    fast = mm.LAST is not None and mm.LAST[0] == "fast"
    assert used == (alone if fast else alone + 1)
    _check(w.grad.numpy(), g.T, x)
    _check(b.grad.numpy()[None], np.ones((1, rows), np.float32), g)


@pytest.mark.parametrize("m", [1, 3, 8])
@pytest.mark.parametrize("k", [64, 136, 771])
def test_gemv_float16_parity(m, k, rng, forced):
    """f16 x, w, bias and output through the GEMV (8 halves a 16-byte load where K allows,
    scalars otherwise): f32 sums, so within the f32 dot-product bound plus the output's f16
    rounding (2^-11 relative)."""
    if not backend.current().has_f16:
        pytest.skip("float16 tensors need shader-f16, which this adapter does not offer")
    n = 93
    x = rng.standard_normal((m, k)).astype(np.float16)
    w = rng.standard_normal((n, k)).astype(np.float16)
    b = rng.standard_normal(n).astype(np.float16)
    rm = 1 if m == 1 else 2 if m == 2 else 4 if m <= 4 else 8
    for vec in (1, 4):
        mm.FORCE = ("gemv", (rm, vec))
        for bias in (None, b):
            got = F.linear(pr.tensor(x), pr.tensor(w), None if bias is None else pr.tensor(bias))
            assert mm.LAST == ("gemv", (rm, vec if k % 8 == 0 else 1, "f16"))
            _check_f16(got, x, w.T, bias)


@pytest.mark.parametrize("m", [1, 5])
@pytest.mark.parametrize("k", [64, 97])
def test_gemv_cols_float16_parity(m, k, rng, forced):
    """x @ w with w (K, N) row-major in f16 (GPT-2's Conv1D layout) through `gemv_cols`: four
    halves a load of w's row, f32 sums; within the f32 bound plus the f16 output rounding."""
    if not backend.current().has_f16:
        pytest.skip("float16 tensors need shader-f16, which this adapter does not offer")
    n = 36
    x = rng.standard_normal((m, k)).astype(np.float16)
    w = rng.standard_normal((k, n)).astype(np.float16)
    b = rng.standard_normal(n).astype(np.float16)
    rm = 1 if m == 1 else 2 if m == 2 else 4 if m <= 4 else 8
    mm.FORCE = ("gemvn", (rm,))
    for bias in (None, b):
        if bias is None:
            got = pr.tensor(x) @ pr.tensor(w)
        else:
            got = pr.addmm(pr.tensor(bias), pr.tensor(x), pr.tensor(w))
        assert mm.LAST == ("gemvn", (rm, "f16"))
        _check_f16(got, x, w, bias)


@pytest.mark.parametrize("force", [("gemv", (4, 4)), ("gemvn", (4,))])
def test_float16_gemv_past_the_loop_budget_splits_k(force, rng, forced, loop_budget):
    """The f16 GEMVs split K as the f32 ones do where one invocation's loop would pass the
    budget; the result within the f32 bound over the chunks plus the f16 output rounding."""
    if not backend.current().has_f16:
        pytest.skip("float16 tensors need shader-f16, which this adapter does not offer")
    loop_budget(40)
    m, k, n = 3, 6400, 36
    x = rng.standard_normal((m, k)).astype(np.float16)
    w = rng.standard_normal((n, k)).astype(np.float16)
    mm.FORCE = force
    mm._plans.clear()
    if force[0] == "gemv":
        got = F.linear(pr.tensor(x), pr.tensor(w))
    else:
        got = pr.tensor(x) @ pr.tensor(np.ascontiguousarray(w.T))
    assert any(p[0] == "split" for p in mm._plans.values())
    _check_f16(got, x, w.T, chunks=True)


# ---- bfloat16: the GEMVs read packed bf16 (two a u32 word; eight a 16-byte load) ----------------
def _bf16(a):
    """a rounded to bfloat16 (as torch's CPU rounds: nearest even), as float32 numpy."""
    u = np.ascontiguousarray(a, np.float32).view(np.uint32).astype(np.uint64)
    u = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16 << 16).astype(np.uint32)
    return u.view(np.float32)


def _to_bf16(a):
    return pr.tensor(a).to(pr.bfloat16)


def _check_bf16(got, a, b, bias=None, alpha=1.0, beta=1.0):
    """A bf16 product with f32 sums (a, b, bias already bf16 values): the f32 dot-product bound
    plus the bf16 output's one rounding (2^-8 of the result)."""
    assert got.dtype is pr.bfloat16
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    ref, bound = alpha * (a64 @ b64), abs(alpha) * (np.abs(a64) @ np.abs(b64))
    if bias is not None:
        ref, bound = ref + beta * bias, bound + abs(beta) * np.abs(bias)
    tol = 2 * (a.shape[-1] + 2) * 2.0**-24 * bound + 2.0**-8 * np.abs(ref) + 2.0**-126
    err = np.abs(got.float().numpy().astype(np.float64) - ref)
    assert (err <= tol).all(), f"worst error {float((err / tol).max()):.2f}x the bound"


@pytest.mark.parametrize("m", [1, 3, 8])
@pytest.mark.parametrize("k", [64, 136, 771])
@pytest.mark.parametrize("n", [94, 93])
def test_gemv_bfloat16_parity(m, k, n, rng, forced):
    """bf16 x, w, bias through the GEMV (8 values a 16-byte load where K allows, each value's
    half of its word otherwise), f32 sums, one rounding to bf16 on store: an even N stores two
    columns a word, an odd N stores f32 sums (and an f32 bias) rounded by one cast after."""
    x = _bf16(rng.standard_normal((m, k)))
    w = _bf16(rng.standard_normal((n, k)))
    b = _bf16(rng.standard_normal(n))
    rm = mm.baked_rows(m)
    tail = ("bf16",) if n % 2 == 0 else ("bf16", "f32")
    for vec in (1, 4):
        mm.FORCE = ("gemv", (rm, vec))
        for bias in (None, b):
            got = F.linear(_to_bf16(x), _to_bf16(w), None if bias is None else _to_bf16(bias))
            assert mm.LAST == ("gemv", (rm, vec if k % 8 == 0 else 1) + tail)
            _check_bf16(got, x, w.T, bias)
    if n % 2 == 0:
        mm.FORCE = ("gemv", (rm, 4))
        got = _to_bf16(x) @ _to_bf16(w).T
        assert mm.LAST[0] == "gemv" and mm.LAST[1][2:] == ("bf16",)
        _check_bf16(got, x, w.T)


@pytest.mark.parametrize("m", [1, 5])
@pytest.mark.parametrize("k", [64, 97])
def test_gemv_cols_bfloat16_parity(m, k, rng, forced):
    """x @ w and addmm(bias, x, w) with w (K, N) in bf16 (GPT-2's Conv1D layout) through
    `gemv_cols`: four values a load of w's row, f32 sums, two words a store; alpha and beta in
    the epilogue."""
    n = 36
    x = _bf16(rng.standard_normal((m, k)))
    w = _bf16(rng.standard_normal((k, n)))
    b = _bf16(rng.standard_normal(n))
    mm.FORCE = ("gemvn", (mm.baked_rows(m),))
    got = _to_bf16(x) @ _to_bf16(w)
    assert mm.LAST == ("gemvn", (mm.baked_rows(m), "bf16"))
    _check_bf16(got, x, w)
    got = pr.addmm(_to_bf16(b), _to_bf16(x), _to_bf16(w), beta=0.5, alpha=-1.5)
    assert mm.LAST == ("gemvn", (mm.baked_rows(m), "bf16"))
    _check_bf16(got, x, w, b, alpha=-1.5, beta=0.5)


def test_gemv_bfloat16_batched(rng, forced):
    """A batch of products (3, 2, K) @ (K, N)ᵀ with an even N: each batch's output starts on
    a word, so the pairs stay whole."""
    x = _bf16(rng.standard_normal((3, 2, 200)))
    w = _bf16(rng.standard_normal((46, 200)))
    mm.FORCE = ("gemv", (8, 4))
    got = _to_bf16(x) @ _to_bf16(w).T
    assert mm.LAST == ("gemv", (8, 4, "bf16"))
    _check_bf16(got, x, w.T)


def test_bfloat16_linear_on_a_gpu_reads_the_weight_once(rng, as_gpu):
    """Batch-1 bf16 F.linear on a GPU: one GEMV dispatch (no f32 copy of the weight made, as the
    widening ops/fallback does for other bf16 ops); an odd N adds the bias's widening and the
    output's rounding; more rows than the GEMV takes are widened (and still right)."""
    k = 256
    x = _bf16(rng.standard_normal((1, k)))
    dev = backend.current()
    poison = core.POISON
    core.set_poison(False)  # (the suite's NaN fills of new tensors are kernels too)
    try:
        for n, want in ((128, 1), (127, 3)):
            w, b = (
                _to_bf16(_bf16(rng.standard_normal((n, k)))),
                _to_bf16(_bf16(rng.standard_normal(n))),
            )
            F.linear(_to_bf16(x), w, b)
            pr.synchronize()
            xt = _to_bf16(x)
            pr.synchronize()
            d0 = dev.dispatches
            got = F.linear(xt, w, b)
            pr.synchronize()
            assert dev.dispatches - d0 == want, n
            assert mm.LAST[0] == "gemv"
            _check_bf16(got, x, w.float().numpy().T, b.float().numpy())
    finally:
        core.set_poison(poison)
    xs = _bf16(rng.standard_normal((mm.GEMV_MAX_M + 1, k)))
    w = _bf16(rng.standard_normal((64, k)))
    got = F.linear(_to_bf16(xs), _to_bf16(w))
    assert got.dtype is pr.bfloat16 and mm.LAST[0] != "gemv"
    _check_bf16(got, xs, w.T)


def test_bfloat16_gemv_past_the_loop_budget_widens(rng, forced, loop_budget):
    """Where the bf16 GEMV's loop would pass the budget, linear widens to f32 (whose GEMMs split
    K) instead of splitting into bf16-rounded partial sums."""
    loop_budget(40)
    m, k, n = 3, 6400, 36
    x = _bf16(rng.standard_normal((m, k)))
    w = _bf16(rng.standard_normal((n, k)))
    mm.FORCE = ("gemv", (4, 4))
    mm._plans.clear()
    got = F.linear(_to_bf16(x), _to_bf16(w))
    assert mm.LAST[1][2:] == ("f32",)  # (the widened product's chunks)
    _check_bf16(got, x, w.T)


def test_bfloat16_gemv_gradients(rng, forced):
    """Autograd through the bf16 GEMV: the gradients (bf16, through the widened products) within
    the bf16 bound of float64's."""
    m, k, n = 2, 72, 40
    x = _bf16(rng.standard_normal((m, k)))
    w = _bf16(rng.standard_normal((n, k)))
    g = _bf16(rng.standard_normal((m, n)))
    xt = _to_bf16(x).requires_grad_()
    wt = _to_bf16(w).requires_grad_()
    mm.FORCE = ("gemv", (2, 4))
    y = F.linear(xt, wt)
    assert mm.LAST == ("gemv", (2, 4, "bf16"))
    mm.FORCE = None
    y.backward(_to_bf16(g))
    _check_bf16(xt.grad, g, w)
    _check_bf16(wt.grad, g.T, x)


# ---- the fast tiles over f16 and bf16 storage (kernels/matmul.gemm_fast's `st`) -----------------
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("lay", ["k", "n", "mn"])
def test_fast_tiles_half_storage(dtype, lay, rng, forced):
    """x @ w.T ("k"), x @ w ("n") and g.T @ x ("mn", a weight gradient's layout) with f16 or bf16
    operands, a bias, and a batch, through the fast 32x32 tile: f32 tiles and sums, one rounding
    on store (the f32 bound plus 2^-11 / 2^-8 of the result)."""
    if dtype == "float16" and not backend.current().has_f16:
        pytest.skip("float16 tensors need shader-f16, which this adapter does not offer")
    dt = getattr(pr, dtype)
    rnd = (lambda a: a.astype(np.float16).astype(np.float32)) if dtype == "float16" else _bf16
    m, k, n = 64, 96, 32
    a = rnd(rng.standard_normal((2, m, k)))
    b = rnd(rng.standard_normal((k, n)))
    e = rnd(rng.standard_normal(n))
    A = pr.tensor(a).to(dt)
    if lay == "k":
        B = pr.tensor(np.ascontiguousarray(b.T)).to(dt).T
    elif lay == "n":
        B = pr.tensor(b).to(dt)
    else:
        A = pr.tensor(np.ascontiguousarray(a.transpose(0, 2, 1))).to(dt).mT
        B = pr.tensor(b).to(dt)
    mm.FORCE = ("fast", (32, 32, 4, 4, 16, True))
    mm._plans.clear()
    got = mm.gemm(A, B, pr.tensor(e).to(dt).expand(2, m, n))
    assert mm.LAST == ("fast", (32, 32, 4, 4, 16, True))
    assert got.dtype is dt
    ref = a.astype(np.float64) @ b.astype(np.float64) + e
    bound = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)) + np.abs(e)
    u = 2.0**-11 if dtype == "float16" else 2.0**-8
    tol = 2 * (k + 2) * 2.0**-24 * bound + u * np.abs(ref) + 2.0**-24
    err = np.abs(got.float().numpy().astype(np.float64) - ref)
    assert (err <= tol).all(), f"worst error {float((err / tol).max()):.2f}x the bound"


def test_bfloat16_product_without_a_packed_kernel_widens(rng, as_gpu):
    """A bf16 product that neither a GEMV nor a fast tile takes (N odd, many rows) runs widened
    to f32 (ops/fallback) and gives the same bf16 result; nothing of the packed plan ran."""
    x = _bf16(rng.standard_normal((70, 64)))
    w = _bf16(rng.standard_normal((33, 64)))
    got = F.linear(_to_bf16(x), _to_bf16(w))
    assert got.dtype is pr.bfloat16 and mm.LAST[1] is not None
    assert any(p == ("widen",) for p in mm._plans.values())
    _check_bf16(got, x, w.T)


def test_bfloat16_operands_must_match():
    """A bf16 matrix with a float32 one is refused as float16 with float32 is (torch raises
    too), not widened into a float32 product."""
    for f in (
        lambda: pr.ones(3, 4) @ pr.ones(4, 2).bfloat16(),
        lambda: F.linear(pr.ones(3, 4).bfloat16(), pr.ones(2, 4)),
        lambda: pr.addmm(pr.ones(2), pr.ones(3, 4), pr.ones(4, 2).bfloat16()),
    ):
        with pytest.raises(TypeError, match="same dtype"):
            f()


def _rule_shapes(rng):
    """(M, K, N) for the GPU rules' tiles: the K-group tile's (below 1M outputs, K >= 768: the
    batch-1 linears, and drawn at random on its 32-grid), the 96-column and big tiles' (their
    tiles filling a wave), and ragged ones that no fast tile divides."""
    drawn = [
        (
            32 * int(rng.integers(1, 9)),
            32 * int(rng.integers(24, 33)),
            32 * int(rng.integers(1, 25)),
        )
        for _ in range(3)
    ]
    return [(128, 768, 768), (96, 800, 320), *drawn, (4096, 32, 768), (2048, 16, 2048),
            (130, 770, 100)]  # fmt: skip


@pytest.mark.parametrize("impl", ["wgpu", "dawn"])
def test_gpu_rules_tiles_parity(impl, rng, as_gpu, monkeypatch):
    """F.linear under each implementation's GPU rule (ops/matmul.py FAST_GPU, FAST_GPU_DAWN: the
    K-group tile, Dawn's 128x96 tile, the big tile) on the shapes that select each, some drawn
    at random: the rule's own choice runs, within the dot-product bound of float64 numpy."""
    dev = backend.current()
    monkeypatch.setattr(dev, "impl", impl)
    ran = set()
    for m, k, n in _rule_shapes(rng):
        x = rng.standard_normal((m, k)).astype(np.float32)
        w = rng.standard_normal((n, k)).astype(np.float32)
        b = rng.standard_normal(n).astype(np.float32)
        tx, tw = pr.tensor(x), pr.tensor(w)
        want = mm._choose(
            dev, m, n, k, 1, mm._fast_layout(tx, tw.T, None, pr.float32, [(), (), ()])
        )
        got = F.linear(tx, tw, pr.tensor(b)).numpy()
        if mm.LAST[0] == "fast":  # (a split K or a GEMV may take the product instead)
            assert mm.LAST == want, (m, k, n, mm.LAST, want)
            ran.add(mm.LAST[1])
        _check(got, x, w.T, b)
    # (wgpu-native's big tile needs 33 KiB of workgroup memory, more than lavapipe's 32: the
    # rule passes it by there, and its stand-in in K steps of 8 is test_matmul's FAST_VARIANTS)
    big = mm.BIG_TILE_16X8 if impl == "dawn" else mm.BIG_TILE
    fits = mm._fast_fits(dev, big, "k", 4096, 768, 768)
    assert mm.KG_TILE in ran and (big in ran) == fits
    assert fits or impl == "wgpu"
    assert (mm.WIDE96_TILE in ran) == (impl == "dawn")
