"""Kernels stay correct past the device's loop budget (backend/quirks.py).

lavapipe stops an invocation after 65,535 loop iterations in all and the kernel silently writes
a wrong result, so every kernel family plans its loops against `ops.core.max_loop_iterations()`.
Each family has two tests here (conv, pool and resampling kernels test theirs beside them):
  - one past the real budget on a budget-limited device (`past_budget`: on a device without a
    budget, a forced small one, so the same split path runs);
  - one with a forced small budget (`loop_budget`), which reaches the split at small sizes.
"""

from __future__ import annotations

import numpy as np
import pytest

import pyrite as pr
import pyrite.nn.functional as F
from pyrite import backend
from pyrite.ops import matmul as MM
from pyrite.ops import reduce as R
from pyrite.ops.core import max_loop_iterations
from pyrite.testing.tolerance import assert_close

EPS32 = 2.0**-24


def test_budget_is_measured_on_cpu_adapters():
    dev = backend.current()
    if dev.adapter_type == "CPU":
        # every CPU adapter seen so far (Mesa's llvmpipe) has one; the probe found it
        assert dev.loop_budget is not None and dev.loop_budget >= 1024
    assert pr.device_info()["loop_budget"] == dev.loop_budget


def test_budget_override_env(tmp_path):
    import subprocess
    import sys

    code = "from pyrite import backend; print(backend.current().loop_budget)"
    env = {"PYRITE_LOOP_BUDGET": "5000", "PATH": "/usr/bin:/bin"}
    import os

    env.update({k: v for k, v in os.environ.items() if k.startswith(("VK_", "PYTHON", "HOME"))})
    env["PYRITE_LOOP_BUDGET"] = "5000"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.stdout.strip() == "5000", out.stderr
    env["PYRITE_LOOP_BUDGET"] = "lots"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode != 0 and "PYRITE_LOOP_BUDGET" in out.stderr


# ---- GEMM: K is split into chunks whose loops fit -------------------------------------------
def _ones_product(m, k, n):
    a = pr.ones(m, k)
    b = pr.ones(k, n)
    return (a @ b).numpy()


def test_gemm_past_budget_direct(past_budget):
    # the case: (1, K) @ (K, 1) of ones gave 65,535 on lavapipe; the direct kernel loops
    # K times an invocation
    k = past_budget() * 2 + 17
    got = _ones_product(1, k, 1)
    assert got.shape == (1, 1) and got[0, 0] == k
    x = pr.ones(k)
    assert pr.dot(x, x).item() == k


def test_gemm_past_budget_tiled(past_budget, rng):
    # the tiled kernel loops 35 times a 16-long K step (exit tests included)
    k = past_budget() // 35 * 16 * 3 + 5
    a = rng.integers(-2, 3, (96, k)).astype(np.float32)
    b = rng.integers(-2, 3, (k, 80)).astype(np.float32)
    MM.LAST = None
    got = (pr.tensor(a) @ pr.tensor(b)).numpy()
    np.testing.assert_array_equal(got, a.astype(np.float64) @ b)  # small integers: exact


@pytest.mark.parametrize(
    "force",
    [("tiled", None), ("direct", (8, 8, 4, 4)), ("direct", (1, 64, 4, 1)), ("fast", None)],
    ids=["tiled", "direct", "direct-mv", "fast"],
)
def test_gemm_split_k_forced(loop_budget, rng, monkeypatch, force):
    loop_budget(2048)  # planners' limit 1,024 iterations
    if force[0] == "fast":
        dev = backend.current()
        table = MM.FAST_CPU if dev.adapter_type == "CPU" else MM.FAST_GPU
        force = ("fast", table[-1][1])
    monkeypatch.setattr(MM, "FORCE", force)
    m, n = (64, 64) if force[0] != "fast" else (force[1][0], force[1][1])
    k = 16 * 1024 + 64 * 3 + (0 if force[0] == "fast" else 7)
    a = rng.standard_normal((2, m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    bias = rng.standard_normal((n,)).astype(np.float32)
    got = pr.addmm(pr.tensor(bias), pr.tensor(a[0]), pr.tensor(b), beta=0.5, alpha=2.0)
    want = 0.5 * bias + 2.0 * (a[0].astype(np.float64) @ b)
    tol = k * EPS32 * np.abs(a[0]) @ np.abs(b) * 2 + 1e-5
    assert_close(got.numpy(), want, tol, 0.0, "addmm split-K")
    got = pr.tensor(a) @ pr.tensor(b)  # batched, B broadcast
    want = a.astype(np.float64) @ b
    assert_close(got.numpy(), want, k * EPS32 * np.abs(a) @ np.abs(b) + 1e-5, 0.0, "bmm split-K")


def test_gemm_split_k_int_and_transposed(loop_budget, rng):
    loop_budget(2048)
    k = 5000
    a = rng.integers(-50, 50, (7, k)).astype(np.int32)
    b = rng.integers(-50, 50, (3, k)).astype(np.int32)
    got = pr.tensor(a) @ pr.tensor(b).t()  # B read transposed, K-major
    np.testing.assert_array_equal(got.numpy(), a.astype(np.int64) @ b.T)


def test_attention_over_many_keys(past_budget, rng):
    # the case: attention over 100,000 keys was wrong on lavapipe (the P @ V product
    # loops over every key)
    s = max(past_budget() + 123, 1000)
    q = pr.tensor(rng.standard_normal((1, 2, 3, 8)).astype(np.float32))
    k = pr.tensor(rng.standard_normal((1, 2, s, 8)).astype(np.float32))
    v = pr.tensor(rng.standard_normal((1, 2, s, 8)).astype(np.float32))
    got = F.scaled_dot_product_attention(q, k, v).numpy()
    qn, kn, vn = (t.numpy().astype(np.float64) for t in (q, k, v))
    sc = qn @ kn.swapaxes(-1, -2) / np.sqrt(8)
    p = np.exp(sc - sc.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    want = p @ vn
    # each output is a convex combination of |v| <= ~5: a dot of s terms in f32
    assert_close(got, want, s * EPS32 * 5 + 1e-6, 0.0, "sdpa")


# ---- scans: rows are chunked, chunk totals scanned, each chunk rescanned from its carry ----
def test_scan_past_budget(past_budget):
    # one row whose one-workgroup scan would pass the budget (lavapipe: ~7.8M elements; a 16M
    # cumsum used to be refused there)
    n = (past_budget() - 256) // 2 * 256 + 1001
    x = pr.ones(n)
    c = x.cumsum(0)
    tail = c[-3:].numpy()
    np.testing.assert_array_equal(tail, np.arange(n - 2, n + 1, dtype=np.float64))
    assert c[n // 2].item() == n // 2 + 1


@pytest.mark.parametrize("op", ["cumsum", "cumprod"])
def test_scan_chunked_forced(loop_budget, rng, op):
    loop_budget(1200)  # planners limit 600: chunks of 256 elements
    limit = max_loop_iterations()
    chunk = max(256, (limit - 256) // 2 * 256)
    n = chunk * 3 + 77
    if op == "cumsum":
        a = rng.standard_normal((3, n)).astype(np.float32)
        tol = lambda w: n * EPS32 * np.abs(a).cumsum(1) * 2
    else:
        a = (1 + 1e-4 * rng.standard_normal((3, n))).astype(np.float32)
        tol = lambda w: n * EPS32 * np.abs(w) * 2
    want = getattr(np, op)(a.astype(np.float64), 1)
    got = getattr(pr.tensor(a), op)(1).numpy()
    assert_close(got, want, tol(want), 0.0, op)
    # along a strided dim, transposed
    got = getattr(pr.tensor(np.ascontiguousarray(a.T)), op)(0).numpy().T
    assert_close(got, want, tol(want), 0.0, op + " dim 0")


def test_scan_chunked_int_exact(loop_budget, rng):
    loop_budget(1200)
    a = rng.integers(-9, 10, (2, 100_003)).astype(np.int32)
    np.testing.assert_array_equal(pr.tensor(a).cumsum(1).numpy(), np.cumsum(a, 1))


def test_scan_chunked_gpu_rule(monkeypatch, rng):
    # FORCE_SCAN_CHUNK reaches the chunked kernels at small sizes on any device
    monkeypatch.setattr(R, "FORCE_SCAN_CHUNK", 256)
    a = rng.standard_normal((5, 1031)).astype(np.float32)
    got = pr.tensor(a).cumsum(-1).numpy()
    want = np.cumsum(a.astype(np.float64), -1)
    assert_close(got, want, 1031 * EPS32 * np.abs(a).cumsum(-1) * 2, 0.0, "cumsum")


# ---- reductions: rows whose row kernel would pass the budget split --------------------------
def test_reduce_forced_budget(loop_budget, rng):
    loop_budget(2048)  # limit 1,024: serial rows past it go to the row kernel; past ~254K, split
    a = rng.standard_normal((3, 300_007)).astype(np.float32)
    x = pr.tensor(a)
    s = x.sum(1).numpy()
    assert R.LAST_PATH.startswith("split")
    assert_close(s, a.astype(np.float64).sum(1), 300_007 * EPS32 * np.abs(a).sum(1), 0.0, "sum")
    np.testing.assert_array_equal(x.argmax(1).numpy(), a.argmax(1))
    b = rng.standard_normal((5, 2000)).astype(np.float32)
    y = pr.tensor(b).amax(1).numpy()
    assert R.LAST_PATH in ("row", "serial") or R.LAST_PATH.startswith("split")
    np.testing.assert_array_equal(y, b.max(1))


# ---- fused row ops: rows past two passes' worth of loops are composed from reductions -------
@pytest.mark.parametrize("op", ["softmax", "log_softmax", "layer_norm", "rms_norm"])
def test_rowops_forced_budget(loop_budget, rng, op):
    import torch

    loop_budget(2048)
    n = 2 * 1024 * 256 // 2 + 333  # 2·ceil(n/256) passes the 1,024-iteration limit
    a = rng.standard_normal((2, n)).astype(np.float32)
    w = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    x, t = pr.tensor(a), torch.tensor(a)
    if op in ("softmax", "log_softmax"):
        got = getattr(x, op)(-1)
        want = getattr(t.double(), op)(-1)
    elif op == "layer_norm":
        got = F.layer_norm(x, (n,), pr.tensor(w), pr.tensor(b))
        want = torch.nn.functional.layer_norm(
            t.double(), (n,), torch.tensor(w).double(), torch.tensor(b).double()
        )
    else:
        got = F.rms_norm(x, (n,), pr.tensor(w))
        want = torch.nn.functional.rms_norm(t.double(), (n,), torch.tensor(w).double())
    want = want.numpy()
    assert_close(got.numpy(), want, 64 * EPS32 * (np.abs(want) + 1), 64 * EPS32, op)


def test_softmax_past_budget(past_budget):
    n = (past_budget() - 40) // 2 * 256 + 700
    x = pr.ones(1, n)
    s = x.softmax(-1)
    assert abs(s[0, 0].item() * n - 1) < 1e-5
    assert abs(s[0, -1].item() * n - 1) < 1e-5
