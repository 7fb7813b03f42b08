"""`pyrite bench`: what the current device does, beside its measured ceilings and installed peers.

Each figure is the median of several timed repeats after a warm-up, timed on the host around a
`synchronize()` (so it includes submission; for the kernels that matter here the GPU time
dominates). Ceilings are measured on the spot: a plain buffer-to-buffer copy for bandwidth. Peers
are numpy and PyTorch on the CPU when installed (and PyTorch on CUDA when that is available, on the
lent H200). On lavapipe (a CPU) only ratios mean anything.

    python -m pyrite bench [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import numpy as np

import pyrite as pr
from pyrite import backend

# A GPU lowers its clocks when idle: the lent H200 drops its SM clock from 1,980 to 345 MHz
# about 2 s after its last sustained work (nvidia-smi's clocks.sm, reason "Idle"), and kernels
# then run ~4x slower (int8 GEMV 17.8 -> 80.7 us, f32 GEMV 50 -> 139 us); 0.25 s of back-to-back
# kernels brings it back, while one tiny kernel every 50 ms does not (2026-12-03,
# scripts/gpu_slow_state.py --busy). A timing that follows host work (building inputs, torch CPU
# peers, compiling) would catch the slow clock, so every timing starts with `warm_gpu`.
WARM_AFTER_IDLE_S = 1.0  # idle longer than this since the last timing: warm up first
WARM_S = 0.3  # seconds of back-to-back copies a warm-up runs
_last_busy = [0.0]
_warm_bufs: list = []


def warm_gpu(after_idle_s: float | None = None):
    """Bring a GPU adapter's clocks up before a timing: WARM_S seconds of back-to-back copies
    when more than `after_idle_s` (default WARM_AFTER_IDLE_S) has passed since the last timing
    ended (nothing on a CPU adapter); 0: always (a timing of short kernels after host work:
    sparse short kernels let the clock drop within the second). The clock belongs to the card,
    so this warms it for torch's CUDA peers too."""
    dev = backend.current()
    idle = WARM_AFTER_IDLE_S if after_idle_s is None else after_idle_s
    if dev.adapter_type == "CPU" or time.perf_counter() - _last_busy[0] < idle:
        return
    if not _warm_bufs or _warm_bufs[0] is not dev:
        _warm_bufs[:] = [dev, pr.rand(16 << 20), pr.empty(16 << 20)]
    _, x, y = _warm_bufs
    end = time.perf_counter() + WARM_S
    while time.perf_counter() < end:
        for _ in range(20):
            dev.copy(x._storage.buffer, 0, y._storage.buffer, 0, 64 << 20)
        pr.synchronize()
    _busy()


def _busy():
    _last_busy[0] = time.perf_counter()


def _median_time(fn, repeats=7, warmup=2, sync=True, inner=None):
    """Median seconds of one call of fn. Calls are repeated `inner` times between
    synchronisations (chosen so one timing spans >= 20 ms) so a readback round trip
    (0.3–0.7 ms on the H200) does not swamp a fast kernel."""
    warm_gpu()
    for _ in range(warmup):
        fn()
    if sync:
        pr.synchronize()
    if inner is None:
        t0 = time.perf_counter()
        fn()
        pr.synchronize()
        one = time.perf_counter() - t0
        inner = max(1, min(200, int(0.02 / max(one, 1e-6))))
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        if sync:
            pr.synchronize()
        times.append((time.perf_counter() - t0) / inner)
    _busy()
    return statistics.median(times)


def _median_us(fn, n=200, warmup=20):
    """Median microseconds of single calls of fn (round trips: each call waits itself)."""
    warm_gpu()
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    _busy()
    return statistics.median(ts) * 1e6


def _peer_time(fn, repeats=5):
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _torch():
    try:
        import torch

        return torch
    except Exception:  # noqa: BLE001
        return None


def _cuda_time(torch, fn, repeats=7):
    """Median seconds of one call of fn on CUDA, timed as `_median_time` times pyrite: calls
    back to back, one synchronize per timing of >= 20 ms (a per-call synchronize would add
    torch's ~5-10 µs round trip to every small kernel)."""
    warm_gpu()
    fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    one = time.perf_counter() - t0
    inner = max(1, min(200, int(0.02 / max(one, 1e-6))))
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) / inner)
    _busy()
    return statistics.median(times)


class Report:
    def __init__(self):
        self.rows = []

    def add(self, name, value, unit, ceiling=None, peers=None, note=""):
        self.rows.append(
            {
                "name": name,
                "value": value,
                "unit": unit,
                "ceiling": ceiling,
                "peers": peers or {},
                "note": note,
            }
        )
        peer_txt = "  ".join(f"{k} {v:,.2f}" for k, v in (peers or {}).items() if v is not None)
        ceil_txt = f"  (ceiling {ceiling:,.2f})" if ceiling else ""
        print(f"  {name:<42} {value:>12,.2f} {unit:<8}{ceil_txt}  {peer_txt}  {note}", flush=True)


def bench_copy(rep, n):
    dev = backend.current()
    x = pr.rand(n)
    y = pr.empty(n)
    nbytes = n * 4

    def plain():
        dev.copy(x._storage.buffer, 0, y._storage.buffer, 0, nbytes)

    t_copy = _median_time(plain)
    from pyrite.kernels.common import grid_for
    from pyrite.kernels.elementwise import vec4_copy_kernel

    vec = vec4_copy_kernel(4)
    bufs = (x._storage.buffer, y._storage.buffer)

    def vec4():
        dev.dispatch(vec, bufs, [n // 4], grid_for(n // 4, 256 * 4))

    t_vec = _median_time(vec4)
    # the ceiling: the faster of the driver's copy and the plainest vec4 copy kernel
    ceiling = 2 * nbytes / min(t_copy, t_vec) / 1e9

    def ew():
        y.copy_(x)

    t_ew = _median_time(ew)
    peers = {"numpy": 2 * nbytes / _peer_time(lambda: np.copyto(xn, xn2)) / 1e9}
    torch = _torch()
    if torch is not None:
        xt = torch.rand(n)
        yt = torch.empty(n)
        peers["torch-cpu"] = 2 * nbytes / _peer_time(lambda: yt.copy_(xt)) / 1e9
        if torch.cuda.is_available():
            xc = torch.rand(n, device="cuda")
            yc = torch.empty(n, device="cuda")
            peers["torch-cuda"] = 2 * nbytes / _cuda_time(torch, lambda: yc.copy_(xc)) / 1e9
    rep.add(f"buffer copy ({nbytes >> 20} MiB), read+write", 2 * nbytes / t_copy / 1e9, "GB/s")
    rep.add("vec4 copy kernel (the ceiling used below)", 2 * nbytes / t_vec / 1e9, "GB/s")
    rep.add("elementwise copy kernel (copy_)", 2 * nbytes / t_ew / 1e9, "GB/s", ceiling, peers)
    a = pr.rand(n)

    def add():
        return a + x

    t_add = _median_time(add)
    an, bn = np.random.rand(n).astype(np.float32), np.random.rand(n).astype(np.float32)
    add_peers = {"numpy": 3 * nbytes / _peer_time(lambda: an + bn) / 1e9}
    if torch is not None:
        at, bt = torch.from_numpy(an), torch.from_numpy(bn)
        add_peers["torch-cpu"] = 3 * nbytes / _peer_time(lambda: at + bt) / 1e9
        if torch.cuda.is_available():
            ac, bc = at.cuda(), bt.cuda()
            add_peers["torch-cuda"] = 3 * nbytes / _cuda_time(torch, lambda: ac + bc) / 1e9
    rep.add(
        "elementwise add a + b (2 reads, 1 write)",
        3 * nbytes / t_add / 1e9,
        "GB/s",
        ceiling,
        add_peers,
    )


xn = xn2 = None


def bench_reduce(rep, n):
    if not hasattr(pr, "sum"):
        rep.add("sum (not built yet)", 0.0, "GB/s")
        return
    x = pr.rand(n)

    def red():
        return x.sum()

    t = _median_time(red)
    xn_ = np.random.rand(n).astype(np.float32)
    peers = {"numpy": n * 4 / _peer_time(lambda: xn_.sum()) / 1e9}
    torch = _torch()
    if torch is not None:
        xt = torch.from_numpy(xn_)
        peers["torch-cpu"] = n * 4 / _peer_time(lambda: xt.sum()) / 1e9
        if torch.cuda.is_available():
            xc = xt.cuda()
            peers["torch-cuda"] = n * 4 / _cuda_time(torch, lambda: xc.sum()) / 1e9
    rep.add(f"sum of {n:,} f32", n * 4 / t / 1e9, "GB/s", None, peers)
    x2 = pr.rand(n // 1024, 1024)
    t2 = _median_time(lambda: x2.sum(dim=1))
    rep.add(f"row sums ({n // 1024:,} x 1024)", n * 4 / t2 / 1e9, "GB/s")
    # a scan of one long row: chunked (totals, their scan, rescan) where the rows are few
    m = min(n, 16 << 20)
    x3 = pr.rand(m)
    t3 = _median_time(lambda: x3.cumsum(0))
    scan_peers = {}
    if torch is not None and torch.cuda.is_available():
        xc3 = torch.rand(m, device="cuda")
        scan_peers["torch-cuda"] = 2 * m * 4 / _cuda_time(torch, lambda: xc3.cumsum(0)) / 1e9
    rep.add(
        f"cumsum of one row of {m:,} f32 (read+write)",
        2 * m * 4 / t3 / 1e9,
        "GB/s",
        None,
        scan_peers,
    )


def bench_rowops(rep, rows, width=1024):
    """The fused row kernels: one read and one write of the tensor is their floor."""
    x = pr.randn(rows, width)
    nbytes = 2 * rows * width * 4
    torch = _torch()
    F = pr.nn.functional
    cases = [
        ("softmax(dim=-1)", lambda: x.softmax(-1), "softmax"),
        ("layer_norm", lambda: F.layer_norm(x, (width,)), "layer_norm"),
    ]
    for label, fn, tname in cases:
        t = _median_time(fn)
        peers = {}
        if torch is not None:
            xt = torch.from_numpy(np.random.standard_normal((rows, width)).astype(np.float32))
            tf = {
                "softmax": lambda v: v.softmax(-1),
                "layer_norm": lambda v: torch.nn.functional.layer_norm(v, (width,)),
            }[tname]
            peers["torch-cpu"] = nbytes / _peer_time(lambda: tf(xt)) / 1e9
            if torch.cuda.is_available():
                xc = xt.cuda()
                peers["torch-cuda"] = nbytes / _cuda_time(torch, lambda: tf(xc)) / 1e9
        rep.add(f"{label} ({rows:,} x {width})", nbytes / t / 1e9, "GB/s", None, peers)


# torch CUDA's f32 scaled_dot_product_attention on sm80 and later is the CUTLASS memory-efficient
# kernel (fmha_cutlassF_f32_*_sm80), whose products run on the tensor cores as 3xTF32 (CUTLASS's
# OpMultiplyAddFastF32: each f32 operand split in a TF32 high part and a TF32 remainder, three
# tensor-core products; `allow_tf32 = False` does not turn it off). WebGPU reaches no tensor
# cores, so pyrite's attention is SIMT f32 FMAs; the SIMT peer is torch's math path (two batched
# cuBLAS f32 GEMMs with TF32 off around a softmax: scores stored), "torch-cuda-math".
TORCH_ATTENTION_NOTE = "torch-cuda: 3xTF32 tensor cores; torch-cuda-math: f32 FMA, unfused"


def _torch_math_attention(torch):
    """A context that makes torch's scaled_dot_product_attention take its math path (None where
    this torch cannot be told)."""
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError:
        return None
    return sdpa_kernel(SDPBackend.MATH)


def bench_attention(rep, quick=False):
    """scaled_dot_product_attention, forward and forward+backward, at the GPT bench's shape
    (causal), BERT-base's (a padding mask) and issue 6's long causal one (16 heads x 4096 tokens
    x 64), in GFLOP/s of the 4·B·H·L·S·E multiply-adds of the forward (halved where causal;
    backward: 2.5x that, FlashAttention-2's count); then decode, one query a head over a cache of
    4096 keys (also with grouped-query heads), in µs a call (and GB/s of k and v read). torch
    beside, in the same run."""
    F = pr.nn.functional
    torch = _torch()
    # (label, (B, H, L, S, E), causal, padding mask, with backward)
    cases = [
        ("GPT bench, causal", (8, 4, 64, 64, 32), True, False, True),
        ("BERT-base, padding mask", (32, 12, 128, 128, 64), False, True, True),
        ("causal, 4096 tokens", (1, 16, 4096, 4096, 64), True, False, True),
        ("decode over 4096 keys", (1, 16, 1, 4096, 64), False, False, False),
        ("decode over 4096 keys, 32 heads, E=128", (1, 32, 1, 4096, 128), False, False, False),
        # (B, Hq, L, S, E, Hk): Llama-3-8B's grouped heads, 32 query heads over 8 key/value heads
        (
            "decode over 4096 keys, 32 heads over 8, E=128",
            (1, 32, 1, 4096, 128, 8),
            False,
            False,
            False,
        ),  # fmt: skip
    ]
    if quick:
        cases = [
            ("GPT bench, causal", (8, 4, 64, 64, 32), True, False, True),
            ("BERT-like, padding mask", (2, 12, 128, 128, 64), False, True, True),
            ("decode over 1024 keys", (1, 4, 1, 1024, 64), False, False, False),
            ("decode over 1024 keys, 4 heads over 2", (1, 4, 1, 1024, 64, 2), False, False, False),
        ]
    rng = np.random.default_rng(0)
    for label, shape, causal, masked, with_backward in cases:
        B, H, L, S, E = shape[:5]
        Hk = shape[5] if len(shape) > 5 else H  # (grouped-query heads: enable_gqa)
        qkv = [rng.standard_normal((B, h, n, E)).astype(np.float32) for h, n in ((H, L), (Hk, S),
                                                                                  (Hk, S))]  # fmt: skip
        keep = np.ones((B, 1, 1, S), dtype=bool)
        keep[:, :, :, S - S // 4 :] = False  # the last quarter of each sequence is padding
        flops = 4 * B * H * L * S * E // (2 if causal else 1)
        decode = L == 1
        if flops > 1e10 and backend.current().adapter_type == "CPU":
            print(f"  attention {label}: skipped on a CPU adapter (minutes a call)", flush=True)
            continue

        def run(lib, tensors, mask, backward, F=None):
            kw = {"is_causal": True} if causal else {"attn_mask": mask} if masked else {}
            if Hk != H:
                kw["enable_gqa"] = True
            out = F.scaled_dot_product_attention(*tensors, **kw)
            if backward:
                out.sum().backward()
            return out

        for backward in (False, True) if with_backward else (False,):
            ps = [pr.tensor(a).requires_grad_(backward) for a in qkv]
            pm = pr.tensor(keep)
            t = _median_time(lambda: run(pr, ps, pm, backward, F), repeats=5)
            work = flops * (3.5 if backward else 1.0)
            times = {}
            if torch is not None:
                tf = torch.nn.functional
                ts = [torch.tensor(a, requires_grad=backward) for a in qkv]
                tm = torch.tensor(keep)
                cuda = torch.cuda.is_available()
                if not cuda or work < 1e10:  # (the long causal case takes seconds on a CPU)
                    times["torch-cpu"] = _peer_time(lambda: run(torch, ts, tm, backward, tf))
                if cuda:
                    ts = [torch.tensor(a, device="cuda", requires_grad=backward) for a in qkv]
                    tm = tm.cuda()
                    times["torch-cuda"] = _cuda_time(
                        torch, lambda: run(torch, ts, tm, backward, tf)
                    )
                    math_peer = _torch_math_attention(torch)
                    if math_peer is not None and not decode:
                        with math_peer:
                            times["torch-cuda-math"] = _cuda_time(
                                torch, lambda: run(torch, ts, tm, backward, tf)
                            )
                    del ts, tm
            what = "forward+backward" if backward else "forward"
            heads = H if Hk == H else f"{H}/{Hk}"
            name = f"attention {what} {B}x{heads}x{L}x{S}x{E} ({label})"
            if decode:  # latency: µs a call, lower is better; the note gives GB/s of k and v
                kv = 2 * B * Hk * S * E * 4
                peers = {k: v * 1e6 for k, v in times.items()}
                rep.add(name, t * 1e6, "us", None, peers, f"{kv / t / 1e9:,.3g} GB/s of k, v")
            else:
                peers = {k: work / v / 1e9 for k, v in times.items()}
                note = TORCH_ATTENTION_NOTE if "torch-cuda" in times else ""
                rep.add(name, work / t / 1e9, "GFLOP/s", None, peers, note)


def bench_conv(rep, quick=False):
    """conv2d forward, 3x3 with padding 1 and a bias, at ResNet-50's stage shapes (batch 32) and
    a VAE decoder's (512 channels at 64x64, batch 1), in GFLOP/s of 2·N·O·C·9·H·W: the implicit
    GEMM (ops/conv.py, the column matrix never stored) beside im2col + GEMM, each forced, and
    torch CUDA (cuDNN, TF32 off) in the same run. The note gives the column matrix im2col
    writes."""
    from pyrite.ops import conv as C

    F = pr.nn.functional
    torch = _torch()
    cases = [  # (N, C, O, H, stride)
        (32, 64, 64, 56, 1),
        (32, 128, 128, 28, 1),
        (32, 256, 256, 14, 1),
        (32, 128, 128, 56, 2),
        (1, 512, 512, 64, 1),
    ]
    if quick:
        cases = [(2, 32, 64, 32, 1), (2, 64, 128, 16, 2)]
    rng = np.random.default_rng(0)
    before = C.IMPLICIT
    try:
        for N, Cin, O, H, s in cases:
            xs = rng.standard_normal((N, Cin, H, H)).astype(np.float32)
            ws = (rng.standard_normal((O, Cin, 3, 3)) / (3 * Cin**0.5)).astype(np.float32)
            bs = rng.standard_normal(O).astype(np.float32)
            x, w, b = pr.tensor(xs), pr.tensor(ws), pr.tensor(bs)
            Ho = (H - 1) // s + 1
            work = 2 * N * O * Cin * 9 * Ho * Ho
            times = {}
            for mode in (True, False):
                C.IMPLICIT = mode
                times[mode] = _median_time(lambda: F.conv2d(x, w, b, s, 1), repeats=5)
            C.IMPLICIT = True
            F.conv2d(x, w, b, s, 1)
            took = C.LAST_IMPLICIT
            peers = {"im2col": work / times[False] / 1e9}
            if torch is not None and torch.cuda.is_available():
                torch.backends.cudnn.allow_tf32 = False
                tx, tw, tb = (torch.tensor(a, device="cuda") for a in (xs, ws, bs))
                tf = torch.nn.functional
                peers["torch-cuda"] = (
                    work / _cuda_time(torch, lambda: tf.conv2d(tx, tw, tb, s, 1)) / 1e9
                )
                del tx, tw, tb
            cols_mb = N * Cin * 9 * Ho * Ho * 4 / 2**20
            note = f"implicit tile {took}" if took else "implicit refused: im2col both"
            rep.add(
                f"conv2d 3x3 {N}x{Cin}x{H}x{H} -> {O}, stride {s}",
                work / times[True] / 1e9,
                "GFLOP/s",
                None,
                peers,
                f"{note}; im2col's columns {cols_mb:,.0f} MiB",
            )
        _bench_conv_transpose(rep, quick, torch, rng)
    finally:
        C.IMPLICIT = before


def _bench_conv_transpose(rep, quick, torch, rng):
    """conv_transpose2d 4x4 stride 2 padding 1 (a GAN or VAE decoder's upsampling): the implicit
    GEMM by output phases beside col2im and cuDNN, GFLOP/s of the useful multiply-adds
    (2·N·Cin·Cout·16·H·W: each input element meets all 16 kernel offsets)."""
    from pyrite.ops import conv as C

    F = pr.nn.functional
    N, Cin, O, H = (2, 64, 64, 16) if quick else (8, 512, 256, 32)
    xs = rng.standard_normal((N, Cin, H, H)).astype(np.float32)
    ws = (rng.standard_normal((Cin, O, 4, 4)) / (4 * Cin**0.5)).astype(np.float32)
    x, w = pr.tensor(xs), pr.tensor(ws)
    work = 2 * N * Cin * O * 16 * H * H
    times = {}
    for mode in (True, False):  # (forced both ways: the rule takes phases on CPU adapters only)
        C.IMPLICIT = C.PHASES = mode
        try:
            times[mode] = _median_time(lambda: F.conv_transpose2d(x, w, None, 2, 1), repeats=5)
        finally:
            C.IMPLICIT = C.PHASES = None
    peers = {"col2im": work / times[False] / 1e9}
    if torch is not None and torch.cuda.is_available():
        tx, tw = torch.tensor(xs, device="cuda"), torch.tensor(ws, device="cuda")
        tf = torch.nn.functional
        peers["torch-cuda"] = (
            work / _cuda_time(torch, lambda: tf.conv_transpose2d(tx, tw, None, 2, 1)) / 1e9
        )
        del tx, tw
    rep.add(
        f"conv_transpose2d 4x4/2 {N}x{Cin}x{H}x{H} -> {O}",
        work / times[True] / 1e9,
        "GFLOP/s",
        None,
        peers,
        "implicit GEMM by output phases",
    )


def bench_latency(rep):
    """Round trips (issue 9): a small reduction read back, one element read back, and a
    synchronize with nothing pending; median of 200 after 20 warm calls, torch CUDA beside."""
    x = pr.randn(128, 768)

    med = _median_us
    torch = _torch()
    tc = None
    if torch is not None and torch.cuda.is_available():
        tc = torch.randn(128, 768, device="cuda")
    rows = [
        ("x.sum().item(), x of 128x768", lambda: x.sum().item(), lambda: tc.sum().item()),
        (
            "loss and accuracy read: pr.to_numpy(x.sum(), x.mean()) / two .item()",
            lambda: pr.to_numpy(x.sum(), x.mean()),
            lambda: (tc.sum().item(), tc.mean().item()),
        ),
        ("x[0, 0].item()", lambda: x[0, 0].item(), lambda: tc[0, 0].item()),
        ("synchronize() with nothing pending", pr.synchronize, lambda: torch.cuda.synchronize()),
    ]
    for label, fn, tfn in rows:
        peers = {"torch-cuda": med(tfn)} if tc is not None else {}
        rep.add(label, med(fn), "us", None, peers, "lower is better")
    # issue 9's small linears and a chain of them (per op, with one synchronisation at the end)
    F = pr.nn.functional
    rng = np.random.default_rng(0)
    for m, k, n in ((128, 768, 768), (128, 3072, 768)):
        xa = rng.standard_normal((m, k)).astype(np.float32)
        wa = (rng.standard_normal((n, k)) / np.sqrt(k)).astype(np.float32)
        ba = rng.standard_normal(n).astype(np.float32)
        x, w, b = pr.tensor(xa), pr.tensor(wa), pr.tensor(ba)
        t = _median_time(lambda: F.linear(x, w, b))
        peers = {}
        if tc is not None:
            xc, wc, bc = (torch.tensor(a, device="cuda") for a in (xa, wa, ba))
            torch.backends.cuda.matmul.allow_tf32 = False
            peers["torch-cuda"] = (
                _cuda_time(torch, lambda: torch.nn.functional.linear(xc, wc, bc)) * 1e6
            )
        rep.add(f"F.linear {m}x{k} . {n}x{k}T + b", t * 1e6, "us", None, peers, "lower is better")
    xa = rng.standard_normal((128, 768)).astype(np.float32)
    wa = (rng.standard_normal((768, 768)) / np.sqrt(768)).astype(np.float32)
    x, w = pr.tensor(xa), pr.tensor(wa)

    def chain(lib, x, w):
        for _ in range(100):
            x = lib.nn.functional.linear(x, w) * 0.03
        return x

    t = _median_time(lambda: chain(pr, x, w), repeats=5)
    peers = {}
    if tc is not None:
        xc, wc = torch.tensor(xa, device="cuda"), torch.tensor(wa, device="cuda")
        peers["torch-cuda"] = _cuda_time(torch, lambda: chain(torch, xc, wc)) / 200 * 1e6
    rep.add("chain of 100 x (F.linear 128x768 . 768^2, * 0.03), per op", t / 200 * 1e6, "us",
            None, peers, "lower is better")  # fmt: skip
    compiled = pr.compile(lambda x: chain(pr, x, w))  # (the * 0.03 runs in each product's store)
    for _ in range(3):
        compiled(x)
    t = _median_time(lambda: compiled(x), repeats=5)
    rep.add("the same chain under pr.compile, per op", t / 200 * 1e6, "us", None, peers,
            f"{compiled.stats().get('kernels')} kernels a call")  # fmt: skip


def bench_matmul(rep, sizes):
    if not hasattr(pr, "matmul"):
        rep.add("matmul (not built yet)", 0.0, "GFLOP/s")
        return
    torch = _torch()
    for s in sizes:
        a = pr.rand(s, s)
        b = pr.rand(s, s)
        t = _median_time(lambda: a @ b, repeats=5 if s >= 2048 else 7)
        flops = 2 * s**3
        an = np.random.rand(s, s).astype(np.float32)
        bn = np.random.rand(s, s).astype(np.float32)
        peers = {"numpy": flops / _peer_time(lambda: an @ bn, 3) / 1e9}
        if torch is not None:
            at, bt = torch.from_numpy(an), torch.from_numpy(bn)
            peers["torch-cpu"] = flops / _peer_time(lambda: at @ bt, 3) / 1e9
            if torch.cuda.is_available():
                ac, bc = at.cuda(), bt.cuda()
                torch.backends.cuda.matmul.allow_tf32 = False
                peers["torch-cuda-f32"] = flops / _cuda_time(torch, lambda: ac @ bc) / 1e9
        rep.add(f"matmul {s}x{s}x{s} f32", flops / t / 1e9, "GFLOP/s", None, peers)
    if "shader-f16" in pr.device_info()["features"]:
        _bench_matmul_f16(rep, sizes[-1], flops / t / 1e9, torch)


def _bench_matmul_f16(rep, s, f32_rate, torch):
    """The largest product with f16 storage (f32 sums), and with f16 arithmetic
    (`pr.backends.cuda.matmul.allow_fp16_accumulation`), beside the f32 figure (issue 6's goal:
    storage at least f32's rate, arithmetic 1.6x) and torch's f16 (tensor cores)."""
    a, b = pr.rand(s, s, dtype=pr.float16), pr.rand(s, s, dtype=pr.float16)
    flops = 2 * s**3
    peers = {"pyrite-f32": f32_rate}
    if torch is not None and torch.cuda.is_available():
        ac = torch.rand(s, s, device="cuda", dtype=torch.float16)
        bc = torch.rand(s, s, device="cuda", dtype=torch.float16)
        peers["torch-cuda-f16-tensor-cores"] = flops / _cuda_time(torch, lambda: ac @ bc) / 1e9
    flag = pr.backends.cuda.matmul
    for arith in (False, True):
        flag.allow_fp16_accumulation = arith
        try:
            t = _median_time(lambda: a @ b, repeats=5 if s >= 2048 else 7)
        finally:
            flag.allow_fp16_accumulation = False
        what = "f16 arithmetic (allow_fp16_accumulation)" if arith else "f16 storage, f32 sums"
        rep.add(f"matmul {s}x{s}x{s} {what}", flops / t / 1e9, "GFLOP/s", None, dict(peers))


def bench_overhead(rep, chain=1000):
    """Eager per-op cost: a chain of small adds, recorded and run to completion."""
    x = pr.ones(1024)
    for _ in range(50):
        x = x + 1
    pr.synchronize()

    def run():
        y = x
        for _ in range(chain):
            y = y + 1
        return y

    t = _median_time(run, repeats=5, warmup=1, inner=1)
    us = t / chain * 1e6
    xn_ = np.ones(1024, dtype=np.float32)

    def np_run():
        y = xn_
        for _ in range(chain):
            y = y + 1

    peers = {"numpy": _peer_time(np_run) / chain * 1e6}
    torch = _torch()
    if torch is not None:
        xt = torch.ones(1024)

        def t_run():
            y = xt
            for _ in range(chain):
                y = y + 1

        peers["torch-cpu"] = _peer_time(t_run) / chain * 1e6
        if torch.cuda.is_available():
            xc = torch.ones(1024, device="cuda")

            def c_run():
                y = xc
                for _ in range(chain):
                    y = y + 1

            peers["torch-cuda"] = _cuda_time(torch, c_run, 5) / chain * 1e6
    rep.add(
        f"eager per-op overhead ({chain} chained adds)", us, "us/op", None, peers, "lower is better"
    )
    # the same chain recorded for backward (an input that requires grad): autograd's cost
    w = pr.ones(1024).requires_grad_()

    def run_rec():
        y = w * 1.0
        for _ in range(chain):
            y = y + 1
        return y

    t_rec = _median_time(run_rec, repeats=5, warmup=1, inner=1)
    rec_peers = {}
    if torch is not None:
        wt = torch.ones(1024, requires_grad=True)

        def t_rec_run():
            y = wt * 1.0
            for _ in range(chain):
                y = y + 1

        rec_peers["torch-cpu"] = _peer_time(t_rec_run) / chain * 1e6
    rep.add(
        f"eager per-op overhead, recording ({chain} adds)",
        t_rec / chain * 1e6,
        "us/op",
        None,
        rec_peers,
        f"{t_rec / t:.2f}x the unrecorded chain",
    )


def bench_baked(rep):
    """Sizes baked into the WGSL as constants vs read from the info words (DESIGN.md asks for
    both, per kernel family): the same contiguous add, and the cost of a pipeline per shape."""
    from pyrite.kernels.common import KernelSource, grid_for
    from pyrite.kernels.elementwise import map_kernel
    from pyrite.ops.core import empty, per_thread

    dev = backend.current()
    for n in (1 << 16, 1 << 24):
        a, b = pr.rand(n), pr.rand(n)
        out = empty((n,), pr.float32)
        a + b  # builds the info-word pipeline
        contiguous = ("f32", "f32", "c", False)
        src = map_kernel(
            "x0 + x1", (contiguous, contiguous), ("f32", "f32", "c"), 1, (), per_thread()
        )
        baked = KernelSource(
            src.wgsl.replace("info[0]", f"{n}")
            .replace("info[1]", "0")
            .replace("info[2]", "0")
            .replace("info[3]", "0"),
            src.modes,
        )
        bufs = [a._storage.buffer, b._storage.buffer, out._storage.buffer]
        t0 = time.perf_counter()
        dev.pipeline(baked)
        build_ms = (time.perf_counter() - t0) * 1e3
        t_info = _median_time(lambda: a + b)
        t_baked = _median_time(
            lambda: dev.dispatch(baked, bufs, [], grid_for(n, 256 * per_thread()))
        )
        rep.add(
            f"add {n:,}: info words / baked sizes",
            t_info / t_baked,
            "x time",
            note=f"info {t_info * 1e6:.1f} us, baked {t_baked * 1e6:.1f} us, "
            f"baked pipeline build {build_ms:.1f} ms",
        )


def _bench_train(rep):
    from .train import bench_train

    bench_train(rep)


def _bench_bert(rep, quick):
    from .bert import bench_bert

    bench_bert(rep, quick)


def _bench_compile(rep, quick):
    from .compiled import bench_compile

    bench_compile(rep, quick)


def _bench_quant(rep, quick):
    from .quant import bench_quant

    bench_quant(rep, quick)


def _bench_web(rep, quick):
    from .web import bench_web

    bench_web(rep, quick)


def main(argv=None):
    p = argparse.ArgumentParser(prog="pyrite bench", description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="small sizes (CI, lavapipe)")
    p.add_argument("--json", metavar="PATH", help="write the results as JSON here")
    p.add_argument(
        "--only",
        default="",
        help="comma list: copy,reduce,rowops,matmul,attention,conv,overhead,latency,baked,train,bert,compile,quant,web",
    )
    args = p.parse_args(argv)
    info = pr.device_info()
    cpu = info["type"] == "CPU"
    quick = args.quick or cpu
    print(
        f"pyrite bench on {info['name']} ({info['implementation']}, {info['backend']}, "
        f"{info['type']})"
    )
    rep = Report()
    only = set(filter(None, args.only.split(",")))
    global xn, xn2
    n = (1 << 22) if quick else (1 << 26)
    xn = np.random.rand(n).astype(np.float32)
    xn2 = np.random.rand(n).astype(np.float32)
    steps = [
        ("copy", lambda: bench_copy(rep, n)),
        ("reduce", lambda: bench_reduce(rep, n)),
        ("rowops", lambda: bench_rowops(rep, n // 1024)),
        ("matmul", lambda: bench_matmul(rep, [256, 512, 1024] if quick else [1024, 2048, 4096])),
        ("attention", lambda: bench_attention(rep, quick)),
        ("conv", lambda: bench_conv(rep, quick)),
        ("overhead", lambda: bench_overhead(rep)),
        ("latency", lambda: bench_latency(rep)),
        ("baked", lambda: bench_baked(rep)),
        ("train", lambda: _bench_train(rep)),
        ("bert", lambda: _bench_bert(rep, quick)),
        ("compile", lambda: _bench_compile(rep, quick)),
        ("quant", lambda: _bench_quant(rep, quick)),
        ("web", lambda: _bench_web(rep, quick)),
    ]
    for name, fn in steps:
        if only and name not in only:
            continue
        try:
            fn()
        except Exception as exc:  # noqa: BLE001 - one broken figure must not hide the others
            print(f"  {name}: failed: {type(exc).__name__}: {exc}", file=sys.stderr)
            rep.rows.append({"name": name, "error": f"{type(exc).__name__}: {exc}"})
    out = {
        "device": info,
        "quick": quick,
        "results": rep.rows,
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
        print(f"wrote {args.json}")
    return out


if __name__ == "__main__":
    main()
