"""Leak test: a mixed eager workload, repeated, holds live bytes, pipelines and buffer creation
at their level after one warm-up iteration (wgpu-py's tests_mem habit: count what must return)."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap

import numpy as np

import pyrite as pr

ITERATIONS = 1000


def _step(i, base):
    x = pr.randn(13, 17)
    y = pr.arange(17, dtype=pr.float32)
    z = (x * 2 + y).exp().clamp(max=5.0)  # elementwise with broadcasting
    w = z.T[::2].contiguous()  # views, then a copy
    m = (w > 1).int()  # compare, then a cast
    base[1:4] += m.float()[:3, :3].sum() if hasattr(pr, "sum") else 1.0
    v = pr.where(x > 0, x, 0.0).reshape(-1)[::3]
    if i % 100 == 0:
        return float(v.numpy().sum()) + float(base.numpy().sum())
    return None


def test_mixed_workload_does_not_leak():
    pr.manual_seed(0)
    base = pr.zeros(7)
    _step(0, base)  # warm-up: pipelines built, pool buckets filled
    gc.collect()
    pr.synchronize()
    s0 = pr.memory_stats()
    for i in range(1, ITERATIONS + 1):
        out = _step(i, base)
        if out is not None:
            assert np.isfinite(out)
    gc.collect()
    pr.synchronize()
    s1 = pr.memory_stats()
    assert s1["live_bytes"] == s0["live_bytes"], (s0, s1)
    assert s1["pipelines"] == s0["pipelines"], (s0, s1)
    # the pool may settle after warm-up, but must stop creating buffers: a per-iteration leak
    # would add ~ITERATIONS buffers here
    assert s1["buffers_created"] - s0["buffers_created"] <= 8, (s0, s1)
    assert s1["pooled_bytes"] <= s0["pooled_bytes"] + (1 << 20), (s0, s1)


# Regression (fixed in d161ec8, the pool now owns every buffer it made): tensors that die in a gc
# pass (held by a reference cycle, e.g. an exception kept in a variable whose traceback holds the
# frame that holds the tensors) used to take their GPUBuffer down in the same pass — Python
# finalizes every object of the cycle, so wgpu-py released the buffer while Storage.__del__ handed
# it back to the pool, and a later op bound a released buffer: wgpu-native aborted the process
# ("invalid bind group entry"). Run in a subprocess so an abort is a failure here, not the end of
# the test session.
_GC_CYCLE = textwrap.dedent("""
    import gc
    import pyrite as pr
    gc.set_threshold(50, 1, 1)

    def one(shape_a, shape_b):
        a, b = pr.ones(shape_a), pr.ones(shape_b)
        try:
            a * b
        except ValueError as e:
            err = e  # err -> traceback -> this frame -> err: a cycle holding a and b
        x = pr.arange(5, dtype=pr.float32)
        assert (x * 2 + 1).tolist() == [1.0, 3.0, 5.0, 7.0, 9.0]

    for _ in range(200):
        for sa, sb in (((3,), (4,)), ((2, 3), (3, 2)), ((7, 1), (13, 2)), ((65,), (64,))):
            one(sa, sb)
    gc.collect()
    print("ok")
""")


def test_tensors_freed_by_gc_cycle():
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run(
        [sys.executable, "-c", _GC_CYCLE],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0 and "ok" in proc.stdout, (
        f"exit {proc.returncode}: "
        + "\n".join(
            line
            for line in proc.stderr.splitlines()
            if "panicked" in line or "invalid" in line or "Error" in line
        )[:2000]
    )


def test_a_training_step_leaves_no_reference_cycles():
    """A step's graph (nodes, saved tensors, their buffers) is freed by reference counting when
    the loss dies, not left for the garbage collector: the pool then reuses buffers in the same
    order each step, so the device's bind groups are found in its cache."""
    import gc

    import numpy as np

    import pyrite as pr

    rng = np.random.default_rng(3)
    model = pr.nn.Sequential(
        pr.nn.Linear(13, 17), pr.nn.GELU(), pr.nn.LayerNorm(17), pr.nn.Linear(17, 5)
    )
    opt = pr.optim.AdamW(model.parameters(), lr=1e-3)
    x = pr.tensor(rng.standard_normal((9, 13)).astype(np.float32))
    y = pr.tensor(rng.integers(0, 5, 9))

    def step():
        loss = pr.nn.functional.cross_entropy(model(x).softmax(-1).log(), y)
        opt.zero_grad()
        loss.backward()
        opt.step()

    step()
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        step()
        gc.collect()
        cyclic = [type(o).__name__ for o in gc.garbage]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if was:
            gc.enable()
    assert cyclic == []
