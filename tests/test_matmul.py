"""Matrix products against float64 references, with the dot-product bound K·2⁻²⁴·Σ|aᵢbᵢ| per
output (Σ|a||b| computed with numpy). Awkward sizes, transposed / strided / broadcast operands,
both kernel variants, a batch past 65,535 workgroups, int32, float16, einsum, error messages."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import pyrite as pr
import pyrite.ops.matmul as mmod
from pyrite import backend
from pyrite.testing.tolerance import assert_close
from tests.optable import OpInfo, Sample, check_row

EPS = 2.0**-24


def mm_tol(inputs, expected):
    """K·u·(|a| @ |b|) per output (numpy matmul rules, 1-D operands promoted as matmul does)."""
    a, b = np.abs(inputs[0]), np.abs(inputs[1])
    K = a.shape[-1]
    return K * EPS * np.abs(np.matmul(a, b)) + 1e-30, 0.0


def _mk(*shapes):
    return lambda rng: [rng.standard_normal(s) for s in shapes]


SIZES = [
    (1, 1, 1),
    (3, 17, 5),
    (17, 3, 64),
    (64, 64, 64),
    (65, 127, 1),
    (1, 257, 65),
    (127, 65, 257),
    (257, 17, 3),
]

MATMUL_SAMPLES = (
    [Sample(_mk((m, k), (k, n)), name=f"{m}x{k}x{n}") for m, k, n in SIZES]
    + [
        Sample(_mk((m, k), (k, n)), layout=lay, name=f"{m}x{k}x{n}-{lay}")
        for m, k, n in [(65, 33, 70), (3, 17, 5)]
        for lay in ("tc", "ct", "tt", "sc", "cs")
    ]
    + [
        Sample(_mk((2, 1, 17, 9), (3, 9, 65)), name="bcast"),
        Sample(_mk((4, 70, 33), (33, 66)), name="batch-2d"),
        Sample(_mk((7,), (7,)), name="1d-1d"),
        Sample(_mk((7,), (2, 7, 5)), name="1d-3d"),
        Sample(_mk((3, 4, 7), (7,)), name="3d-1d"),
        Sample(_mk((9, 7), (7,)), name="mv"),
        Sample(_mk((5, 0), (0, 3)), name="k0"),
    ]
)

ROWS = [
    OpInfo("matmul", lambda a, b: a @ b, np.matmul, MATMUL_SAMPLES, tol=mm_tol),
    OpInfo("mm", pr.mm, np.matmul, [Sample(_mk((33, 70), (70, 65)))], tol=mm_tol),
    OpInfo(
        "bmm", pr.bmm, np.matmul, [Sample(_mk((3, 33, 7), (3, 7, 66)), layout="tt")], tol=mm_tol
    ),
    OpInfo("mv", pr.mv, np.matmul, [Sample(_mk((65, 129), (129,)), layout="tc")], tol=mm_tol),
    OpInfo("dot", pr.dot, np.dot, [Sample(_mk((257,), (257,)), layout="sc")], tol=mm_tol),
    OpInfo(
        "outer",
        pr.outer,
        np.outer,
        [Sample(_mk((17,), (65,)))],
        tol=lambda i, e: (EPS * np.abs(e) + 1e-30, 0.0),
    ),
    OpInfo(
        "inner",
        pr.inner,
        np.inner,
        [Sample(_mk((3, 5, 7), (4, 7)))],
        tol=lambda i, e: (7 * EPS * np.abs(np.inner(np.abs(i[0]), np.abs(i[1]))), 0.0),
    ),
]


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.name)
def test_parity(row, rng):
    check_row(row, rng)


FAST_VARIANTS = [
    ("fast", (64, 64, 8, 8, 16, True)),
    ("fast", (64, 64, 8, 8, 16, False)),
    ("fast", (128, 128, 8, 8, 8, True)),
    ("fast", (128, 64, 8, 8, 16, True)),
    ("fast", (128, 128, 8, 16, 8, True)),
    ("fast", (32, 64, 4, 8, 32, True)),
    ("fast", (128, 128, 16, 8, 8, True)),  # ops/matmul.py BIG_TILE_16X8, Dawn's big tile
    # (wgpu-native's BIG_TILE, 256 invocations of 8x8 with the unconditional prefetch, in K steps
    # of 8: its K steps of 16 take 33 KiB of workgroup memory, more than lavapipe's 32)
    ("fast", (128, 128, 8, 8, 8, 3)),
    ("fast", (128, 64, 16, 8, 16, True)),
    ("fast", (128, 96, 8, 12, 16, True)),  # three vec4 column groups an invocation
    ("fast", (64, 96, 8, 12, 16, False)),
    # K groups in a workgroup (gemm_fast's `kg`): sums merged through workgroup memory (in As, or
    # in their own array where As is too small)
    ("fast", (32, 32, 4, 4, 32, True, 4)),
    ("fast", (32, 64, 4, 4, 32, False, 2)),
    ("fast", (16, 32, 4, 4, 64, False, 8)),
    # the deep prefetch (gemm_fast's dbuf = 2: two register sets, loads two K steps ahead; odd
    # step counts end halfway through its two-step loop)
    ("fast", (32, 32, 4, 4, 32, 2, 4)),
    ("fast", (64, 64, 8, 8, 16, 2)),
    ("fast", (128, 128, 16, 8, 8, 2)),
    # the unconditional prefetch (dbuf = 3: the last step reloads its own tile)
    ("fast", (128, 128, 16, 8, 8, 3)),
    ("fast", (64, 64, 8, 8, 16, 3)),
    ("fast", (32, 32, 4, 4, 32, 3, 4)),
    # ... two K steps an iteration (dbuf = 4; odd step counts end halfway through)
    ("fast", (128, 128, 16, 8, 8, 4)),
    ("fast", (32, 32, 4, 4, 32, 4, 4)),
    # ... with a barrier right after the loads (dbuf = 5)
    ("fast", (64, 64, 8, 8, 16, 5)),
    # 512 invocations a workgroup (f16 arithmetic's big tile is 128x128 of 8x4 sums)
    ("fast", (128, 128, 8, 4, 16, False)),
]
VARIANTS = [
    ("tiled", None),
    ("direct", (8, 8, 4, 4)),
    ("direct", (1, 64, 4, 1)),
    ("direct", (64, 1, 1, 4)),
] + FAST_VARIANTS
EDGE = [1, 3, 17, 63, 64, 65, 127, 129, 257]


def _forced(variant, fn):
    old = mmod.FORCE
    mmod.FORCE = variant
    try:
        return fn()
    finally:
        mmod.FORCE = old


def _check_mm(a, b, ta, tb, msg):
    """ta @ tb against float64 numpy of the f32-rounded a, b with the dot-product bound."""
    got = (ta @ tb).numpy()
    a32, b32 = a.astype(np.float32).astype(np.float64), b.astype(np.float32).astype(np.float64)
    k = a.shape[-1]
    assert_close(got, a32 @ b32, atol=k * EPS * (np.abs(a32) @ np.abs(b32)) + 1e-30, msg=msg)


@pytest.mark.parametrize("variant", VARIANTS, ids=str)
def test_variants(variant, rng):
    """Every kernel variant on edge sizes, whatever the shape rule would choose (a forced fast
    variant falls back to the general rule where its tile or layout does not apply)."""
    t32 = lambda x: pr.tensor(x, dtype=pr.float32)

    def body():
        for m, k, n in [(1, 1, 1), (65, 17, 3), (3, 33, 130), (70, 40, 66)]:
            a, b = rng.standard_normal((2, m, k)), rng.standard_normal((k, n))
            _check_mm(
                a,
                b,
                t32(a).transpose(1, 2).contiguous().transpose(1, 2),
                t32(b),
                f"{variant} {m}x{k}x{n}",
            )

    _forced(variant, body)


def _fast_cases(bm, bn, bk):
    """(M, K, N) that a fast tile divides, plus edge sizes around it (M, N, K from EDGE)."""
    return [
        (bm, bk, bn),
        (2 * bm, 3 * bk, bn),
        (bm, 2 * bk, 2 * bn),
        (63, 17, 129),
        (65, 64, 127),
        (129, 3, 64),
        (257, 1, 65),
    ]


@pytest.mark.parametrize("variant", FAST_VARIANTS, ids=str)
def test_fast_variants(variant, rng):
    """Each fast variant where it applies (B with unit N stride, B with unit K stride as in
    `x @ w.T`, batched with a broadcast B, an offset view, bias / alpha-beta epilogues) and where
    it must not (edge sizes, unaligned offsets or strides, which fall back and must still be
    right). Asserts which kernel ran so a silent fallback cannot pass for the fast kernel."""
    bm, bn, _, _, bk = variant[1][:5]
    t32 = lambda x: pr.tensor(x, dtype=pr.float32)

    def body():
        for m, k, n in _fast_cases(bm, bn, bk):
            fits = m % bm == 0 and n % bn == 0 and k % bk == 0
            a, b = rng.standard_normal((m, k)), rng.standard_normal((k, n))
            _check_mm(a, b, t32(a), t32(b), f"{variant} {m}x{k}x{n} nn")
            assert (mmod.LAST == variant) == fits, (m, k, n, mmod.LAST)
            # x @ w.T: B's K contiguous
            _check_mm(a, b, t32(a), t32(np.ascontiguousarray(b.T)).t(), f"{variant} {m}x{k}x{n} nt")
            assert (mmod.LAST == variant) == fits, (m, k, n, mmod.LAST)
            # g.T @ x (a weight's gradient): A's M contiguous, with either B
            at = t32(np.ascontiguousarray(a.T)).t()
            _check_mm(a, b, at, t32(b), f"{variant} {m}x{k}x{n} tn")
            assert (mmod.LAST == variant) == fits, (m, k, n, mmod.LAST)
            _check_mm(a, b, at, t32(np.ascontiguousarray(b.T)).t(), f"{variant} {m}x{k}x{n} tt")
            assert (mmod.LAST == variant) == fits, (m, k, n, mmod.LAST)
        m, k, n = bm, 2 * bk, bn
        # batches: A (3, m, k), B broadcast (k, n); and B batched with unit K stride
        a, b = rng.standard_normal((3, m, k)), rng.standard_normal((k, n))
        _check_mm(a, b, t32(a), t32(b), "batch")
        assert mmod.LAST == variant
        b3 = rng.standard_normal((3, k, n))
        _check_mm(
            a,
            b3,
            t32(a),
            t32(np.ascontiguousarray(b3.transpose(0, 2, 1))).transpose(1, 2),
            "batch-nt",
        )
        assert mmod.LAST == variant
        # an aligned offset view (rows 4.. of a bigger A, column slice of B): fast
        big = rng.standard_normal((m + 4, k + 8))
        av, a_ = t32(big)[4:, 8:], big[4:, 8:]
        _check_mm(a_, b, av, t32(b), "offset view")
        assert mmod.LAST == variant
        # unaligned offset / stride: general path, still right
        big = rng.standard_normal((m + 1, k + 1))
        _check_mm(big[1:, 1:], b, t32(big)[1:, 1:], t32(b), "unaligned")
        assert mmod.LAST != variant
        # transposed A (M contiguous) with a K stride not a multiple of 4: general path
        big = rng.standard_normal((k, m + 1))
        _check_mm(big[:, :m].T, b, t32(big)[:, :m].t(), t32(b), "a-t unaligned")
        assert mmod.LAST != variant
        # epilogues: linear (bias) and addmm (alpha, beta) on the fast kernel
        x, w, bias = (
            rng.standard_normal((m, k)),
            rng.standard_normal((n, k)),
            rng.standard_normal(n),
        )
        T = lambda z: torch.tensor(z.astype(np.float32), dtype=torch.float64)
        got = mmod.linear(t32(x), t32(w), t32(bias)).numpy()
        assert mmod.LAST == variant
        want = torch.nn.functional.linear(T(x), T(w), T(bias)).numpy()
        tol = k * EPS * (np.abs(x) @ np.abs(w).T) + 4 * EPS * np.abs(bias) + 1e-6
        assert_close(got, want, atol=tol, msg="linear")
        c = rng.standard_normal((m, n))
        got = pr.addmm(t32(c), t32(x), t32(w).t(), beta=0.5, alpha=2.0).numpy()
        assert mmod.LAST == variant
        want = torch.addmm(T(c), T(x), T(w).T, beta=0.5, alpha=2.0).numpy()
        assert_close(got, want, atol=2 * tol + 4 * EPS * np.abs(c), msg="addmm")

    _forced(variant, body)


def test_edge_sizes_all_variants(rng):
    """Every variant on the edge sizes {1, 3, 17, 63, 64, 65, 127, 129, 257} for M, N and K
    (a rotating subset of the 9^3 triples keeps lavapipe's time modest), with A transposed."""
    t32 = lambda x: pr.tensor(x, dtype=pr.float32)
    triples = [(EDGE[i], EDGE[(i + 3) % 9], EDGE[(i + 5) % 9]) for i in range(9)]
    for vi, variant in enumerate(VARIANTS):

        def body(part=triples[vi % 3 :: 3], variant=variant):
            for m, k, n in part:
                a, b = rng.standard_normal((m, k)), rng.standard_normal((k, n))
                _check_mm(
                    a, b, t32(np.ascontiguousarray(a.T)).t(), t32(b), f"{variant} {m}x{k}x{n}"
                )

        _forced(variant, body)


def test_many_batches(rng):
    """70,000 tiny products: more workgroups than one grid dimension holds."""
    a = rng.standard_normal((70000, 2, 3)).astype(np.float32)
    b = rng.standard_normal((70000, 3, 2)).astype(np.float32)
    got = (pr.tensor(a) @ pr.tensor(b)).numpy()
    want = a.astype(np.float64) @ b.astype(np.float64)
    assert_close(got, want, atol=3 * EPS * (np.abs(a) @ np.abs(b)).astype(np.float64) + 1e-30)


def test_int32(rng):
    a = rng.integers(-50, 50, (17, 33))
    b = rng.integers(-50, 50, (33, 66))
    got = pr.tensor(a, dtype=pr.int32) @ pr.tensor(b, dtype=pr.int32)
    assert got.dtype is pr.int32
    np.testing.assert_array_equal(got.numpy(), a @ b)


def test_float16(rng):
    if not backend.current().has_f16:
        pytest.skip("device has no shader-f16")
    a = rng.standard_normal((17, 65)).astype(np.float16)
    b = rng.standard_normal((65, 70)).astype(np.float16)
    got = pr.tensor(a) @ pr.tensor(b)
    assert got.dtype is pr.float16
    want = a.astype(np.float64) @ b.astype(np.float64)
    # f32 accumulation, then one rounding to f16
    atol = 65 * EPS * (np.abs(a).astype(np.float64) @ np.abs(b)) + 1e-30
    assert_close(got.numpy(), want, atol=atol, rtol=2.0**-11)


@pytest.mark.parametrize(
    "variant",
    FAST_VARIANTS[:2] + FAST_VARIANTS[3:4] + [("fast", (64, 128, 8, 4, 32, 3))],  # (the last:
    ids=str,  # ACC16_BIG_TILE's sums and K steps, the GPUs' f16 arithmetic tile, on fewer rows)
)
def test_float16_accumulation(variant, rng):
    """`pr.backends.cuda.matmul.allow_fp16_accumulation` (off by default): the fast tiles'
    f16 products summed in f16 over each K step of bk, in f32 across steps. Within that bound
    (each step's bk f16 roundings of its |a||b| sum, plus the f32 sum and the output's f16
    rounding) on every layout with a bias epilogue; and it really sums in f16: of a row
    [2048, 1, ..., 1] of one K step, ones are lost (2049 rounds to even 2048) where f32 sums
    give 2048 + bk - 1. How many is the driver's: lavapipe sums in the kernel's order (2048),
    the H100's compiler split the step's chain of f16 fmas in two (2048 + bk / 2)."""
    if not backend.current().has_f16:
        pytest.skip("device has no shader-f16")
    assert pr.backends.cuda.matmul.allow_fp16_accumulation is False
    bm, bn, _, _, bk, _ = variant[1]
    t16 = lambda x: pr.tensor(x, dtype=pr.float16)
    m, k, n = bm, 3 * bk, 2 * bn
    a = rng.standard_normal((m, k)).astype(np.float16)
    w = rng.standard_normal((n, k)).astype(np.float16)
    bias = rng.standard_normal(n).astype(np.float16)
    a64, w64 = a.astype(np.float64), w.astype(np.float64)
    want = a64 @ w64.T + bias
    bound = np.abs(a64) @ np.abs(w64).T + np.abs(bias)
    tol = (bk + 1) * 2.0**-11 * bound + 2.0**-11 * np.abs(want) + 1e-30
    row = np.ones((bm, bk), np.float16)
    row[:, 0] = 2048
    try:
        pr.backends.cuda.matmul.allow_fp16_accumulation = True

        def body():
            for aa in (t16(a), t16(np.ascontiguousarray(a.T)).t()):
                for ww in (t16(w), t16(np.ascontiguousarray(w.T)).t()):
                    got = mmod.linear(aa, ww, t16(bias))
                    assert mmod.LAST == variant
                    assert got.dtype is pr.float16
                    assert_close(got.numpy().astype(np.float64), want, atol=tol)
            got = (t16(row) @ t16(np.ones((bk, bn), np.float16))).numpy()
            assert mmod.LAST == variant
            assert ((got >= 2048) & (got < 2048 + bk - 1)).all(), np.unique(got)

        _forced(variant, body)
    finally:
        pr.backends.cuda.matmul.allow_fp16_accumulation = False
    got = _forced(variant, lambda: (t16(row) @ t16(np.ones((bk, bn), np.float16))).numpy())
    np.testing.assert_array_equal(got, np.full((bm, bn), np.float16(2048 + bk - 1)))


@pytest.mark.parametrize(
    "variant", [("fast", (64, 64, 8, 8, 16, 3)), ("fast", (64, 64, 8, 16, 16, 4))], ids=str
)
def test_float16_sums_across_k(variant, rng, monkeypatch):
    """ops/matmul.F16_ACCUMULATION = "sums" (gemm_fast's acc16 = 2, cuBLAS's 16F compute: the
    measurement mode beside f16 arithmetic's per-step f32 folds) sums the f16 products in f16
    across the whole of K: within K f16 roundings of the |a||b| sum (plus the output's), and a
    row [2048, 1, ..., 1] over three K steps loses ones in every step (in lavapipe's order all:
    2048; the H100's compiler reassociates the chain, losing fewer) where per-step folds keep at
    least 2048 + 2 bk (each step after the first sums its bk ones exactly, and the f32 sum keeps
    them)."""
    if not backend.current().has_f16:
        pytest.skip("device has no shader-f16")
    bm, bn, _, _, bk, _ = variant[1]
    t16 = lambda x: pr.tensor(x, dtype=pr.float16)
    m, k, n = 2 * bm, 5 * bk, bn
    a = rng.standard_normal((m, k)).astype(np.float16)
    w = rng.standard_normal((n, k)).astype(np.float16)
    a64, w64 = a.astype(np.float64), w.astype(np.float64)
    want = a64 @ w64.T
    tol = (k + 1) * 2.0**-11 * (np.abs(a64) @ np.abs(w64).T)
    row = np.ones((bm, 3 * bk), np.float16)
    row[:, 0] = 2048
    ones = t16(np.ones((3 * bk, bn), np.float16))
    for mode, lo, hi in (("sums", 2048, 2048 + 2 * bk), (True, 2048 + 2 * bk, 2048 + 3 * bk)):
        monkeypatch.setattr(mmod, "F16_ACCUMULATION", mode)
        got = _forced(variant, lambda: mmod.linear(t16(a), t16(w)))
        assert mmod.LAST == variant
        assert_close(got.numpy().astype(np.float64), want, atol=tol)
        got = _forced(variant, lambda: (t16(row) @ ones).numpy())
        assert ((got >= lo) & (got < hi)).all(), (mode, np.unique(got))


def test_baked_shapes(rng, monkeypatch):
    """ops/matmul.BAKE (a measurement switch): the fast tile's kernel has the product's sizes
    and operand strides written in (kernels/common.bake) and computes the same product, within
    the f32 dot-product bound, on both operand layouts."""
    monkeypatch.setattr(mmod, "BAKE", True)
    mmod._plans.clear()  # (only this test's plans below: earlier tests' force the same tile)
    m, k, n = 128, 80, 192
    a = rng.standard_normal((m, k)).astype(np.float32)
    w = rng.standard_normal((n, k)).astype(np.float32)
    want = a.astype(np.float64) @ w.astype(np.float64).T
    bound = (k + 1) * 2.0**-24 * (np.abs(a) @ np.abs(w).T) + 1e-30
    variant = ("fast", (64, 64, 8, 8, 16, 3))
    for ww in (pr.tensor(w), pr.tensor(np.ascontiguousarray(w.T)).t()):
        got = _forced(variant, lambda: mmod.linear(pr.tensor(a), ww))
        assert mmod.LAST == variant
        assert_close(got.numpy().astype(np.float64), want, atol=bound)
    plans = [p for p in mmod._plans.values() if p[0] == "run" and p[6] == variant]
    assert plans and all(f"let K = ({k}i);" in p[1].wgsl for p in plans)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize(
    "variant",
    [("fast", (64, 64, 8, 8, 16, True)), ("fast", (32, 32, 4, 4, 32, True, 4)),
     ("fast", (128, 96, 8, 12, 16, False)), ("fast", (32, 32, 4, 4, 16, 2, 2)),
     ("fast", (64, 64, 8, 8, 16, 3))],
    ids=["64x64", "k-groups", "128x96", "deep-prefetch", "unconditional-prefetch"],
)  # fmt: skip
def test_half_storage_on_fast_tiles(dtype, variant, rng):
    """f16 and bf16 storage through the fast tiles (K groups and 96 columns too): x @ w.T + b
    with f32 sums, within the f32 dot-product bound plus the output's rounding to the storage
    (2^-11 relative for f16, 2^-8 for bf16); the forced tile is the one that ran."""
    if dtype == "float16" and not backend.current().has_f16:
        pytest.skip("device has no shader-f16")
    dt = getattr(pr, dtype)
    bm, bn, _, _, bk = variant[1][:5]
    m, k, n = 2 * bm, 3 * bk, bn
    a, w, bias = (pr.tensor(rng.standard_normal(s), dtype=dt) for s in ((m, k), (n, k), (n,)))
    a64, w64, b64 = (t.float().numpy().astype(np.float64) for t in (a, w, bias))
    want = a64 @ w64.T + b64
    got = _forced(variant, lambda: mmod.linear(a, w, bias))
    assert mmod.LAST == variant and got.dtype is dt
    rel = 2.0**-11 if dtype == "float16" else 2.0**-8
    bound = (k + 2) * 2.0**-24 * (np.abs(a64) @ np.abs(w64).T + np.abs(b64)) + rel * np.abs(want)
    assert_close(got.float().numpy().astype(np.float64), want, atol=bound)


def _rule_rows(monkeypatch, rows):
    """The fast-tile rule's table set to `rows` on whichever device runs the test (FAST_CPU on
    lavapipe, FAST_GPU / FAST_GPU_DAWN on a GPU, whose own rows the H100 took otherwise)."""
    for name in ("FAST_CPU", "FAST_GPU", "FAST_GPU_DAWN"):
        monkeypatch.setattr(mmod, name, list(rows))


def test_float16_accumulation_takes_its_own_big_tile(rng, monkeypatch):
    """Where the rule picks the big tile, f16 arithmetic takes ACC16_BIG_TILE instead (longer
    K steps); f16 storage with f32 sums keeps the big tile. (The GPUs' rule is put on lavapipe,
    with Dawn's big tile, BIG_TILE_16X8, as wgpu-native's needs 33 KiB of workgroup memory, more
    than lavapipe's 32, as does ACC16_BIG_TILE's f16 tiles: a tile of the same invocations in K
    steps of 8 stands in for it.)"""
    if not backend.current().has_f16:
        pytest.skip("device has no shader-f16")
    _rule_rows(monkeypatch, [(0, mmod.BIG_TILE_16X8)])
    monkeypatch.setattr(mmod, "WAVE_FILL", 0.0)
    monkeypatch.setattr(mmod, "ACC16_BIG_TILE", (128, 128, 8, 8, 8, 3))
    a = pr.tensor(rng.standard_normal((128, 64)), dtype=pr.float16)
    w = pr.tensor(rng.standard_normal((256, 64)), dtype=pr.float16)
    want = a.numpy().astype(np.float64) @ w.numpy().astype(np.float64).T
    mmod.linear(a, w)
    assert mmod.LAST == ("fast", mmod.BIG_TILE_16X8)
    try:
        pr.backends.cuda.matmul.allow_fp16_accumulation = True
        got = mmod.linear(a, w)
        assert mmod.LAST == ("fast", mmod.ACC16_BIG_TILE)
    finally:
        pr.backends.cuda.matmul.allow_fp16_accumulation = False
    bound = 9 * 2.0**-11 * (np.abs(a.numpy()).astype(np.float64) @ np.abs(w.numpy()).T)
    assert_close(got.numpy().astype(np.float64), want, atol=bound + 2.0**-11 * np.abs(want))


def test_float16_accumulation_takes_its_big_tile_past_a_wave_of_tiles(rng, monkeypatch):
    """Where the rule's wave-fill test turned the big tile down, f16 arithmetic still takes
    ACC16_BIG_TILE once the product has ACC16_MIN_TILES of its tiles (one row of 128x128
    tiles stands in for a GPU's wave here), and not below that."""
    if not backend.current().has_f16:
        pytest.skip("device has no shader-f16")
    small = (64, 64, 8, 8, 16, True)
    _rule_rows(monkeypatch, [(0, mmod.BIG_TILE_16X8), (0, small)])
    monkeypatch.setattr(mmod, "WAVE_FILL", 2.0)  # (the big tile never fills its waves)
    monkeypatch.setattr(mmod, "ACC16_BIG_TILE", (128, 128, 8, 8, 8, 3))
    monkeypatch.setattr(mmod, "ACC16_MIN_TILES", 2)
    try:
        pr.backends.cuda.matmul.allow_fp16_accumulation = True
        for n, want_tile in ((256, mmod.ACC16_BIG_TILE), (128, small)):
            a = pr.tensor(rng.standard_normal((128, 64)), dtype=pr.float16)
            w = pr.tensor(rng.standard_normal((n, 64)), dtype=pr.float16)
            want = a.numpy().astype(np.float64) @ w.numpy().astype(np.float64).T
            got = mmod.linear(a, w)
            assert mmod.LAST == ("fast", want_tile)
            bound = 9 * 2.0**-11 * (np.abs(a.numpy()).astype(np.float64) @ np.abs(w.numpy()).T)
            assert_close(got.numpy().astype(np.float64), want, atol=bound + 2.0**-11 * np.abs(want))
    finally:
        pr.backends.cuda.matmul.allow_fp16_accumulation = False


def test_addmm_baddbmm_linear(rng):
    t = lambda a: pr.tensor(a, dtype=pr.float32)
    T = lambda a: torch.tensor(a, dtype=torch.float64)
    c, a, b = (
        rng.standard_normal((1, 66)),
        rng.standard_normal((33, 17)),
        rng.standard_normal((17, 66)),
    )
    tol = 17 * EPS * (np.abs(a) @ np.abs(b)) * 2 + 4 * EPS * np.abs(c)
    want = torch.addmm(T(c), T(a), T(b), beta=0.5, alpha=2.0).numpy()
    assert_close(pr.addmm(t(c), t(a), t(b), beta=0.5, alpha=2.0).numpy(), want, atol=tol + 1e-6)
    assert_close(pr.addmm(t(c), t(a), t(b)).numpy(), T(c).numpy() + a @ b, atol=tol + 1e-6)
    c, a, b = (
        rng.standard_normal((3, 5, 1)),
        rng.standard_normal((3, 5, 9)),
        rng.standard_normal((3, 9, 70)),
    )
    want = torch.baddbmm(T(c), T(a), T(b), beta=1.5, alpha=-1.0).numpy()
    tol = 9 * EPS * (np.abs(a) @ np.abs(b)) + 4 * EPS * np.abs(c) + 1e-6
    assert_close(pr.baddbmm(t(c), t(a), t(b), beta=1.5, alpha=-1.0).numpy(), want, atol=tol)
    x, w, bias = (
        rng.standard_normal((2, 3, 33)),
        rng.standard_normal((65, 33)),
        rng.standard_normal(65),
    )
    want = torch.nn.functional.linear(T(x), T(w), T(bias)).numpy()
    tol = 33 * EPS * (np.abs(x) @ np.abs(w).T) + 4 * EPS * np.abs(bias) + 1e-6
    assert_close(mmod.linear(t(x), t(w), t(bias)).numpy(), want, atol=tol)
    assert_close(mmod.linear(t(x[0, 0]), t(w)).numpy(), T(x[0, 0]).numpy() @ w.T, atol=tol[0, 0])


EINSUMS = [
    ("ij,jk->ik", [(5, 7), (7, 3)]),
    ("bij,bjk->bik", [(2, 5, 7), (2, 7, 3)]),
    ("i,i->", [(17,), (17,)]),
    ("ij->ji", [(4, 5)]),
    ("ii->i", [(6, 6)]),
    ("ii", [(6, 6)]),
    ("bhqd,bhkd->bhqk", [(2, 3, 5, 8), (2, 3, 7, 8)]),
    ("...ij,...jk", [(2, 3, 4, 5), (3, 5, 6)]),
    ("i,j->ij", [(4,), (5,)]),
    ("ij,jk,kl->il", [(3, 4), (4, 5), (5, 2)]),
    ("bij->b", [(3, 4, 5)]),
    ("ij,kj", [(3, 4), (5, 4)]),
]


@pytest.mark.parametrize("eq,shapes", EINSUMS, ids=[e for e, _ in EINSUMS])
def test_einsum(eq, shapes, rng):
    arrays = [rng.standard_normal(s).astype(np.float32).astype(np.float64) for s in shapes]
    want = torch.einsum(eq, *[torch.tensor(a) for a in arrays]).numpy()
    absref = torch.einsum(eq, *[torch.tensor(np.abs(a)) for a in arrays]).numpy()
    n = max(int(np.prod([max(s) for s in shapes])), 1)
    got = pr.einsum(eq, *[pr.tensor(a, dtype=pr.float32) for a in arrays]).numpy()
    assert_close(got, want, atol=n * EPS * absref + 1e-30, msg=eq)


def test_errors():
    a, b = pr.ones(2, 3), pr.ones(4, 5)
    with pytest.raises(pr.ShapeError, match=r"\(2, 3\).*\(4, 5\)"):
        a @ b
    with pytest.raises(pr.ShapeError, match="2x3 and 4x5"):
        pr.mm(a, b)
    with pytest.raises(TypeError, match="int32"):
        pr.ones(2, 2) @ pr.ones(2, 2, dtype=pr.int32)
    with pytest.raises(pr.ShapeError, match="1D"):
        pr.tensor(1.0) @ a
    # the next op still works
    np.testing.assert_allclose((a @ pr.ones(3, 2)).numpy(), np.full((2, 2), 3.0))


# ---- regressions found by the differential sweep (tests/test_sweep.py) -------------------------
def test_sweep_inner_with_k_zero_and_outer_promotes():
    np.testing.assert_array_equal(pr.inner(pr.ones(2, 0), pr.ones(0)).numpy(), [0.0, 0.0])
    for a, b in [((True, False), (True, True)), ((1.5, 2.0), (1, 2))]:
        want = torch.outer(torch.tensor(a), torch.tensor(b))
        got = pr.outer(pr.tensor(a), pr.tensor(b))
        assert str(got.dtype).split(".")[1] == str(want.dtype).split(".")[1].replace("64", "32")
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    x = pr.ones(2, 2)
    assert x.addmm_(pr.ones(2, 3), pr.ones(3, 2)) is x and x.tolist() == [[4.0, 4.0]] * 2


@pytest.mark.parametrize("fin,fout", [(3, 0), (0, 4), (0, 0)])
def test_linear_with_no_features_has_gradients(fin, fout, rng):
    """nn.Linear(n, 0) / Linear(0, n) (AdaptiveLogSoftmaxWithLoss builds such tails): the
    backward gives torch's empty gradients and the bias its row sums (reshape(-1, 0) of an
    empty tensor is ambiguous, so the backward folds rows by count)."""
    for shape in ((2, fin), (2, 3, fin)):
        x = rng.standard_normal(shape).astype(np.float32)
        g = rng.standard_normal(shape[:-1] + (fout,)).astype(np.float32)
        px = pr.tensor(x, requires_grad=True)
        pw = pr.tensor(np.zeros((fout, fin), np.float32), requires_grad=True)
        pb = pr.tensor(rng.standard_normal(fout).astype(np.float32), requires_grad=True)
        pr.nn.functional.linear(px, pw, pb).backward(pr.tensor(g))
        tx = torch.tensor(x, requires_grad=True)
        tw = torch.zeros((fout, fin), requires_grad=True)
        tb = torch.tensor(pb.detach().numpy(), requires_grad=True)
        torch.nn.functional.linear(tx, tw, tb).backward(torch.tensor(g))
        for got, want in ((px.grad, tx.grad), (pw.grad, tw.grad), (pb.grad, tb.grad)):
            assert tuple(got.shape) == tuple(want.shape)
            np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-6)


@pytest.mark.parametrize("impl", ["wgpu", "dawn"])
def test_gpu_tile_rule_fills_waves(impl):
    """The big tile is taken where its tiles fill their waves (ops/matmul.py WAVE_FILL), the
    64x64 tile of the implementation's table elsewhere: the shapes of the measured table."""
    from types import SimpleNamespace

    dev = SimpleNamespace(
        adapter_type="DiscreteGPU",
        impl=impl,
        limits={
            "max-compute-invocations-per-workgroup": 1024,
            "max-compute-workgroup-storage-size": 49152,
        },
    )
    dawn = impl == "dawn"
    mid = (mmod.FAST_GPU_DAWN[2] if dawn else mmod.FAST_GPU[1])[1]
    w96 = mmod.WIDE96_TILE if dawn else None  # (Dawn: 128x96 where N divides by 96)
    big = mmod.BIG_TILE_16X8 if dawn else mmod.BIG_TILE
    want = {
        (4096, 4096, 4096): big,  # 1,024 tiles: 97 % of 4 waves
        (2048, 2048, 2048): big,  # 256: one wave, 97 %
        (4096, 3072, 768): w96 or big,  # 768: 97 % of 3 (128x96: 1,024, 97 % of 4)
        # 576: 73 % of 3 (128x96: 768, 97 % of 3); wgpu-native's big tile from BIG_MIN_TILES on
        (4096, 2304, 768): w96 or big,
        (4096, 768, 3072): w96 or mid,  # 192: 73 % of 1 (128x96: 256, 97 %)
        (512, 3072, 768): mid,  # 1.5M outputs; 96 and 128 tiles: 48 % and 36 % of a wave
        (1024, 1024, 1024): mid,  # 64
        # below SMALL_OUTPUTS outputs, K groups from K = KG_MIN_K on
        (128, 768, 768): mmod.KG_TILE,
        (512, 768, 3072): mmod.KG_TILE,
        # from KG2_MIN_OUTPUTS outputs with K <= KG2_MAX_K, 2 groups and the deep prefetch
        # (wgpu-native; Dawn's table keeps KG_TILE)
        (128, 2304, 768): mmod.KG_TILE if dawn else mmod.KG2_TILE,
        (512, 768, 768): mmod.KG_TILE if dawn else mmod.KG2_TILE,
        (128, 3072, 1024): mmod.KG_TILE if dawn else mmod.KG2_TILE,
        (128, 3072, 1536): mmod.KG_TILE,
        (128, 768, 512): (64, 64, 4, 4, 16, True),
    }
    for (M, N, K), params in want.items():
        assert mmod._choose(dev, M, N, K, 1, "k") == ("fast", params), (M, N, K)
    assert mmod.wave_fill(mmod.GPU_SLOTS) == 1.0
    assert mmod.wave_fill(mmod.GPU_SLOTS + 1) == pytest.approx((mmod.GPU_SLOTS + 1) / 528)


def test_gpu_big_tile_past_its_least_tiles(monkeypatch):
    """The big tile is also taken where its waves fill less than WAVE_FILL once the product has
    BIG_MIN_TILES tiles; fewer keep the 64x64 tile (wgpu-native's table); BIG_MIN_TILES = 0
    leaves the wave-fill test alone."""
    from types import SimpleNamespace

    dev = SimpleNamespace(
        adapter_type="DiscreteGPU",
        impl="wgpu",
        limits={
            "max-compute-invocations-per-workgroup": 1024,
            "max-compute-workgroup-storage-size": 49152,
        },
    )
    mid = mmod.FAST_GPU[1][1]
    monkeypatch.setattr(mmod, "BIG_MIN_TILES", mmod.GPU_SLOTS)
    want = {
        (4096, 2304, 768): mmod.BIG_TILE,  # 576 tiles, 73 % of 3 waves
        (2048, 2304, 768): mmod.BIG_TILE,  # 288: 55 % of 2
        (2048, 4224, 512): mmod.BIG_TILE,  # 528: two full waves (taken by the fill alone)
        (4096, 768, 3072): mid,  # 192: 73 % of one wave, fewer than a wave of slots
        (2176, 1408, 256): mid,  # 187 tiles (17 x 11): 71 % of a wave
        (640, 6784, 256): mmod.BIG_TILE,  # 265 (5 x 53): a wave of slots and one, 50 %
    }
    for (M, N, K), params in want.items():
        assert mmod._choose(dev, M, N, K, 1, "k") == ("fast", params), (M, N, K)
    # in a batch the tiles of every product count
    assert mmod._choose(dev, 1024, 1152, 256, 4, "k") == ("fast", mmod.BIG_TILE)  # 4 x 72
    assert mmod._choose(dev, 1024, 1152, 256, 3, "k") == ("fast", mid)  # 216: 82 % of a wave
    monkeypatch.setattr(mmod, "BIG_MIN_TILES", 0)
    assert mmod._choose(dev, 4096, 2304, 768, 1, "k") == ("fast", mid)
    assert mmod._choose(dev, 2048, 4224, 512, 1, "k") == ("fast", mmod.BIG_TILE)
