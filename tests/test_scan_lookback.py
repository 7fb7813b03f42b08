"""The one-pass look-back scan (ops/reduce.SCAN_LOOKBACK, kernels/reduce.py "lookback"):
cumsum / cumprod of rows longer than one staged chunk in one dispatch, each chunk started from
the totals of the chunks before it through the device's persistent scratch. Against float64
numpy with the scan's own tolerance (tests/test_scan.py's `_check`), on lavapipe with the
superblock shrunk so the superblock waits run at small sizes; its bits the same on every run
and whether each wait was served by the owner's store or computed by the waiter; the scratch
left clean; the rule's limits."""

from __future__ import annotations

import numpy as np
import pytest

import pyrite as pr
from pyrite.kernels.reduce import FUSED_SPINS, SCAN_STAGED, lookback_loop_iterations
from pyrite.ops import reduce as R
from tests.test_scan import _check


def _scratch_clean(dev):
    """Both counters 0 and every chunk and superblock word FUSED_EMPTY, read from the device."""
    st = R._lookback_scratch(dev)
    words = 2 + 2 * R.SCAN_LOOKBACK_UNITS  # (the pool's buffer may be larger)
    data = np.frombuffer(dev.read(st.buffer, 0, 4 * words), np.uint32)
    return bool((data[:2] == 0).all() and (data[2:] == R.FUSED_EMPTY).all())


@pytest.fixture
def lookback(monkeypatch):
    monkeypatch.setattr(R, "SCAN_LOOKBACK", True)
    monkeypatch.setattr(R, "SCAN_LOOKBACK_SB", 4)  # (superblocks of 4 chunks: reached at 5)
    # (chunks of SCAN_STAGED on every device: a GPU's rule takes longer ones for long rows,
    # tested on their own below)
    monkeypatch.setattr(R, "SCAN_LOOKBACK_CHUNK", SCAN_STAGED)
    return monkeypatch


@pytest.mark.parametrize("op", ["cumsum", "cumprod"])
@pytest.mark.parametrize(
    "shape",
    [
        (SCAN_STAGED + 1,),  # two chunks, the second of one element
        (3, 2 * SCAN_STAGED),  # whole chunks, three rows
        (2, 9 * SCAN_STAGED + 5),  # superblocks: two whole, a ragged third
        (5, 3, 5003),  # rows over two outer dims
        (1, 23 * SCAN_STAGED - 1),  # 23 chunks: five superblocks and a part
    ],
)
def test_lookback_parity(op, shape, rng, lookback):
    # (ticket order, the last workgroup resetting: the variant the rule runs; the others below)
    a = (1 + 0.01 * rng.standard_normal(shape)).astype(np.float32)
    if op == "cumsum":
        a = a - 1.0
    _check(a, -1, op)
    assert R.SCAN_LAST_PATH.startswith("lookback"), R.SCAN_LAST_PATH
    assert _scratch_clean(pr.backend.current())


def test_lookback_same_bits_whoever_computes_a_total(rng, lookback):
    # a waiter that computes a chunk's or a superblock's total itself (lb_chunk, lb_sb) gets
    # its owner's bits: the run with no waits at all equals the run with them, and two runs
    # agree
    a = rng.standard_normal((2, 13 * SCAN_STAGED + 77)).astype(np.float32) * 100
    x = pr.tensor(a)
    runs = [x.cumsum(1).numpy() for _ in range(2)]
    lookback.setattr(R, "SCAN_LOOKBACK_SPINS", -1)  # (never poll: every word computed)
    runs.append(x.cumsum(1).numpy())
    bits = [r.view(np.uint32) for r in runs]
    assert (bits[0] == bits[1]).all() and (bits[0] == bits[2]).all()
    assert R.SCAN_LAST_PATH == "lookback P=14"
    assert _scratch_clean(pr.backend.current())


def test_lookback_specials_dtypes_and_back_to_back(rng, lookback):
    # NaN (a payload of all ones included: its chunk total is stored canonical, never the
    # empty word) and inf reach every later element; an f16 input and output; three scans in
    # one batch before any read share the scratch one after another
    n = 3 * SCAN_STAGED + 11
    a = rng.standard_normal((3, n)).astype(np.float32)
    a[0, 100] = np.frombuffer(np.uint32(0xFFFFFFFF).tobytes(), np.float32)[0]
    a[1, SCAN_STAGED + 3] = np.inf
    x = pr.tensor(a)
    outs = [x.cumsum(1), x[2:].cumprod(1), x.to(pr.float16).cumsum(1)]
    s, p, h = (o.numpy() for o in outs)
    assert np.isnan(s[0, 100:]).all() and not np.isnan(s[0, :100]).any()
    assert np.isposinf(s[1, SCAN_STAGED + 3 :]).all()
    want = np.cumsum(a[2].astype(np.float64))
    tol = 2 * n * float(np.finfo(np.float32).eps) * np.cumsum(np.abs(a[2].astype(np.float64)))
    assert (np.abs(s[2] - want) <= tol).all()
    pw = np.cumprod(a[2].astype(np.float64))
    assert np.allclose(p[0], pw, rtol=2 * n * 1.2e-7, atol=1e-30, equal_nan=True)
    assert h.dtype == np.float16
    a16 = a.astype(np.float16).astype(np.float64)
    want16 = np.cumsum(a16[2])
    scale = np.cumsum(np.abs(a16[2]))
    assert (np.abs(h[2] - want16) <= 2 * n * 1.2e-7 * scale + np.abs(want16) * 2**-11).all()
    assert _scratch_clean(pr.backend.current())


def test_lookback_rule(monkeypatch):
    # the rule (SCAN_LOOKBACK None) takes it on a GPU for rows past one staged chunk, up to
    # SCAN_LOOKBACK_RULE_UNITS chunks in all and within the loop budget, for f32 compute, in
    # chunks of SCAN_LOOKBACK_LONG_CHUNK for rows longer than that (else SCAN_STAGED); forced,
    # up to the scratch's units; never on a CPU adapter, for an integer scan, or for a forced
    # chunk (tests of the chunked path)
    monkeypatch.setattr(R, "_cpu_adapter", lambda: False)
    monkeypatch.setattr(R, "max_loop_iterations", lambda: 1 << 62)  # (a GPU: no budget)
    long = R.SCAN_LOOKBACK_LONG_CHUNK
    assert long > SCAN_STAGED and R._lookback_unit(long + 1) == long
    assert R._lookback_unit(long) == SCAN_STAGED
    most = R.SCAN_LOOKBACK_RULE_UNITS
    assert R._lookback_parts(1, SCAN_STAGED + 1, "f32") == 2
    assert R._lookback_parts(1, long, "f32") == long // SCAN_STAGED
    assert R._lookback_parts(1, most * long, "f32") == most
    assert R._lookback_parts(1, most * long + 1, "f32") is None
    assert R._lookback_parts(most // 2, 2 * SCAN_STAGED, "f32") == 2
    assert R._lookback_parts(most // 2 + 1, 2 * SCAN_STAGED, "f32") is None
    assert R._lookback_parts(1, SCAN_STAGED, "f32") is None
    assert R._lookback_parts(1, 1 << 20, "i32") is None
    monkeypatch.setattr(R, "SCAN_LOOKBACK", True)
    assert R._lookback_parts(1, 1 << 24, "f32") == (1 << 24) // long
    assert R._lookback_parts(R.SCAN_LOOKBACK_UNITS // 2 + 1, 2 * SCAN_STAGED, "f32") is None
    monkeypatch.setattr(R, "SCAN_LOOKBACK", None)
    monkeypatch.setattr(R, "FORCE_SCAN_CHUNK", 300)
    assert R._lookback_parts(1, 1 << 20, "f32") is None
    monkeypatch.setattr(R, "FORCE_SCAN_CHUNK", None)
    monkeypatch.setattr(R, "SCAN_LOOKBACK", False)
    assert R._lookback_parts(1, 1 << 20, "f32") is None
    # a GPU's worst case: both waits in full, then computed (unbounded loops there), past the
    # budget by one: refused
    worst = lookback_loop_iterations(1, 64, R.WG, FUSED_SPINS, long)
    monkeypatch.setattr(R, "SCAN_LOOKBACK", True)
    monkeypatch.setattr(R, "SCAN_LOOKBACK_SPINS", FUSED_SPINS)
    monkeypatch.setattr(R, "max_loop_iterations", lambda: worst - 1)
    assert R._lookback_parts(1, 64 * long, "f32") is None
    monkeypatch.setattr(R, "max_loop_iterations", lambda: worst)
    assert R._lookback_parts(1, 64 * long, "f32") == 64
    monkeypatch.setattr(R, "SCAN_LOOKBACK", None)
    monkeypatch.setattr(R, "_cpu_adapter", lambda: True)
    assert R._lookback_parts(1, 1 << 20, "f32") is None
    assert R._lookback_unit(1 << 20) == SCAN_STAGED


def test_lookback_other_paths_stay(rng, lookback):
    # an integer scan and rows past lavapipe's budget with the full superblock take the paths
    # before, and are right; a scan along a strided dim takes the look-back as its contiguous
    # copy does, with the same bits
    a = rng.integers(-50, 50, (2, 3 * SCAN_STAGED)).astype(np.int32)
    got = pr.tensor(a).cumsum(1).numpy()
    np.testing.assert_array_equal(got, np.cumsum(a, 1))
    assert not R.SCAN_LAST_PATH.startswith("lookback")
    b = rng.standard_normal((3 * SCAN_STAGED, 3)).astype(np.float32)
    _check(b, 0, "cumsum")
    assert R.SCAN_LAST_PATH == "lookback P=3"
    strided = pr.tensor(b).cumsum(0).numpy()
    np.testing.assert_array_equal(strided, pr.tensor(b.T.copy()).cumsum(1).numpy().T)
    if pr.device_info()["loop_budget"]:
        lookback.setattr(R, "SCAN_LOOKBACK_SB", R.WG)
        c = rng.standard_normal((1, 300 * SCAN_STAGED)).astype(np.float32)
        _check(c, 1, "cumsum")
        assert not R.SCAN_LAST_PATH.startswith("lookback")


def test_lookback_under_compile(rng, lookback):
    # a compiled step replays the one-pass scan with the device's scratch: right every call
    @pr.compile
    def f(x):
        return (x * 2).cumsum(1)

    for _ in range(3):
        a = rng.standard_normal((2, 5 * SCAN_STAGED + 3)).astype(np.float32)
        got = f(pr.tensor(a)).numpy()
        want = np.cumsum(2 * a.astype(np.float64), 1)
        tol = 2 * a.shape[1] * 1.2e-7 * np.cumsum(np.abs(2 * a.astype(np.float64)), 1)
        assert (np.abs(got - want) <= tol).all()
    assert _scratch_clean(pr.backend.current())


@pytest.mark.parametrize("variant", [("id", "last"), ("ticket", "pass"), ("id", "pass")])
def test_lookback_variants_same_bits(variant, rng, lookback):
    # chunks by workgroup id (a chunk whose predecessors have not started computes their
    # totals) and the reset by a second dispatch change who does the work, not the arithmetic:
    # the same bits as the rule's variant, the scratch left clean, and back to back with it
    a = rng.standard_normal((3, 11 * SCAN_STAGED + 5)).astype(np.float32)
    x = pr.tensor(a)
    want = x.cumsum(1).numpy()
    lookback.setattr(R, "SCAN_LOOKBACK_VARIANT", variant)
    got = [x.cumsum(1), x[1:].cumprod(1)]
    lookback.setattr(R, "SCAN_LOOKBACK_VARIANT", ("ticket", "last"))
    again = x.cumsum(1).numpy()
    assert (got[0].numpy().view(np.uint32) == want.view(np.uint32)).all()
    assert (again.view(np.uint32) == want.view(np.uint32)).all()
    _check(a, 1, "cumsum")
    p = got[1].numpy().astype(np.float64)
    ref = np.cumprod(a[1:].astype(np.float64), 1)
    assert ((np.abs(p - ref) <= 2 * a.shape[1] * 1.2e-7 * np.abs(ref) + 1e-30) | (ref == 0)).all()
    assert _scratch_clean(pr.backend.current())


@pytest.mark.parametrize("op", ["cumsum", "cumprod"])
def test_lookback_longer_chunks(op, rng, lookback):
    # chunks of 4,096 (SCAN_LOOKBACK_CHUNK: half the workgroups, each invocation's block 16):
    # right against float64, the same bits whether its waits read or compute the totals,
    # superblocks reached (P = 9 with superblocks of 4), the scratch left clean
    lookback.setattr(R, "SCAN_LOOKBACK_CHUNK", 2 * SCAN_STAGED)
    if R._lookback_unit() != 2 * SCAN_STAGED:
        pytest.skip("the device's workgroup memory holds no 4,096-element chunk")
    n = 9 * 2 * SCAN_STAGED - 3
    a = (1 + 0.01 * rng.standard_normal((2, n))).astype(np.float32)
    if op == "cumsum":
        a = a - 1.0
    _check(a, 1, op)
    assert R.SCAN_LAST_PATH == "lookback P=9"
    x = pr.tensor(a)
    polled = getattr(x, op)(1).numpy()
    lookback.setattr(R, "SCAN_LOOKBACK_SPINS", -1)
    computed = getattr(x, op)(1).numpy()
    assert (polled.view(np.uint32) == computed.view(np.uint32)).all()
    assert _scratch_clean(pr.backend.current())


def test_lookback_chunk_past_workgroup_memory(monkeypatch, lookback):
    # a chunk whose staging the device's workgroup memory cannot hold falls back to
    # SCAN_STAGED; a chunk that is no multiple of the workgroup is refused, by the host and
    # by the kernel generator
    from pyrite.kernels.reduce import scan_kernel, scan_shared_bytes

    room = pr.backend.current().limits.get("max-compute-workgroup-storage-size", 16384)
    big = R.WG * (room // 4 // R.WG + 1)  # (its staging alone passes the limit)
    assert scan_shared_bytes(big, lookback=True) > room
    lookback.setattr(R, "SCAN_LOOKBACK_CHUNK", big)
    assert R._lookback_unit() == SCAN_STAGED
    lookback.setattr(R, "SCAN_LOOKBACK_CHUNK", SCAN_STAGED + 1)
    with pytest.raises(ValueError, match="multiple"):
        R._lookback_unit()
    with pytest.raises(ValueError, match="multiple"):
        scan_kernel("cumsum", "f32", "f32", "f32", 1, "row", "lookback", True, unit=3000)


def test_lookback_early_superblock_totals_same_bits(rng, lookback):
    # superblock totals stored before the waits for the earlier ones (SCAN_LOOKBACK_EARLY: two
    # trees where one did both) give the same bits as the one tree, polled or computed, over
    # several superblocks of 4 and 2 rows; cumprod too; the scratch left clean
    a = rng.standard_normal((2, 19 * SCAN_STAGED + 9)).astype(np.float32)
    x = pr.tensor(a)
    want = [x.cumsum(1).numpy(), x.cumprod(1).numpy()]
    lookback.setattr(R, "SCAN_LOOKBACK_EARLY", True)
    for spins in (None, -1):
        lookback.setattr(R, "SCAN_LOOKBACK_SPINS", spins)
        got = [x.cumsum(1).numpy(), x.cumprod(1).numpy()]
        assert R.SCAN_LAST_PATH == "lookback P=20"
        for g, w in zip(got, want):
            assert (g.view(np.uint32) == w.view(np.uint32)).all()
    _check(a, 1, "cumsum")
    assert _scratch_clean(pr.backend.current())


@pytest.mark.parametrize("force", [None, 512, SCAN_STAGED])
def test_staged_unroll_same_bits(force, rng, lookback):
    # a full staged unit's loads issued together (SCAN_STAGE_UNROLL) load the same elements
    # into the same slots as the loop: the same bits on the look-back (chunks of 2,048 and
    # 4,096, ragged last chunks), on whole staged rows, and on the chunked path (force: its
    # chunk length; full staged chunks at SCAN_STAGED, whose totals pass unrolls too), over a
    # strided view too
    a = rng.standard_normal((3, 5 * SCAN_STAGED + 7)).astype(np.float32)
    b = rng.standard_normal((SCAN_STAGED, 5)).astype(np.float32)
    lookback.setattr(R, "FORCE_SCAN_CHUNK", force)
    cases = [(pr.tensor(a), 1), (pr.tensor(a[:, :SCAN_STAGED]), 1), (pr.tensor(b), 0)]
    for unit in (None, 2 * SCAN_STAGED):
        lookback.setattr(R, "SCAN_LOOKBACK_CHUNK", unit)
        for x, d in cases:
            lookback.setattr(R, "SCAN_STAGE_UNROLL", False)
            want = x.cumsum(d).numpy()
            lookback.setattr(R, "SCAN_STAGE_UNROLL", True)
            got = x.cumsum(d).numpy()
            assert (got.view(np.uint32) == want.view(np.uint32)).all(), (unit, x.shape, d)
    _check(a, 1, "cumsum")
    _check(b, 0, "cumsum")


@pytest.mark.parametrize("chunk", [2 * SCAN_STAGED, SCAN_STAGED + 256])
def test_chunked_path_longer_staged_unit(chunk, rng, monkeypatch):
    # the chunked path staged in units of 4,096 (SCAN_CHUNK_UNIT): full chunks of 4,096 (its
    # loads unrolled) and shorter ones in the longer unit, right against float64 for cumsum
    # and cumprod, and the unrolled loads give the loop's bits
    monkeypatch.setattr(R, "SCAN_CHUNK_UNIT", 2 * SCAN_STAGED)
    if R._chunk_unit() != 2 * SCAN_STAGED:
        pytest.skip("the device's workgroup memory holds no 4,096-element unit")
    monkeypatch.setattr(R, "FORCE_SCAN_CHUNK", chunk)
    a = (1 + 0.01 * rng.standard_normal((3, 5 * chunk + 11))).astype(np.float32)
    _check(a, 1, "cumprod")
    _check(a - 1.0, 1, "cumsum")
    assert R.SCAN_LAST_PATH == f"chunked C={chunk}"
    x = pr.tensor(a - 1.0)
    unrolled = x.cumsum(1).numpy()
    monkeypatch.setattr(R, "SCAN_STAGE_UNROLL", False)
    assert (x.cumsum(1).numpy().view(np.uint32) == unrolled.view(np.uint32)).all()
