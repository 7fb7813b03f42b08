"""Ops from several Python threads at once, and switching devices (pyrite.set_device).

Device switches run in a subprocess: they replace the process's device, which the rest of the
suite shares.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading

import numpy as np

import pyrite as pr


def test_threads_hammer_the_device():
    # four threads each run a chain of ops and read results back, interleaving dispatches,
    # submits, uploads, readbacks and frees of one device's pending batch; every result is
    # checked against numpy (before the lock, this raised "Encoding must not have ended")
    errors = []

    def work(seed):
        try:
            rng = np.random.default_rng(seed)
            for i in range(60):
                a = rng.standard_normal((17, 33)).astype(np.float32)
                b = rng.standard_normal((33, 5)).astype(np.float32)
                x = pr.tensor(a)
                y = ((x * 2 + 1).tanh() @ pr.tensor(b)).sum(1)
                if i % 3 == 0:
                    y = y.cumsum(0)
                want = (np.tanh(a.astype(np.float64) * 2 + 1) @ b).sum(1)
                if i % 3 == 0:
                    want = want.cumsum(0)
                got = y.numpy()
                if not np.allclose(got, want, rtol=1e-4, atol=1e-4):
                    errors.append(f"thread {seed} step {i}: wrong values")
                    return
                del x, y  # buffers go back to the pool from this thread
        except Exception as exc:  # noqa: BLE001 - the test reports every failure
            errors.append(f"thread {seed}: {type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:3]
    # and the device is still sound afterwards
    assert pr.arange(10).sum().item() == 45


def _run(code: str):
    env = dict(os.environ)
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def test_failed_set_device_keeps_the_previous_device():
    out = _run(
        """
        import pyrite as pr
        x = pr.arange(4.0)
        for bad in (dict(device="no-such-gpu"), dict(backend="cuda"),
                    dict(features=["no-such-feature"])):
            try:
                pr.set_device(**bad)
            except pr.DeviceError as e:
                print("refused:", str(e).split(".")[0])
            else:
                print("accepted", bad)
            print((x * 2).tolist(), pr.ones(2).sum().item())
        """
    )
    lines = out.strip().splitlines()
    assert lines.count("[0.0, 2.0, 4.0, 6.0] 2.0") == 3, out
    assert sum(line.startswith("refused:") for line in lines) == 3, out


def test_old_tensor_after_switch_is_a_clear_error():
    out = _run(
        """
        import pyrite as pr
        x = pr.arange(4.0)
        pr.set_device(pr.device_info()["name"])  # a successful switch (to the same adapter)
        y = pr.ones(4)
        for f in (lambda: (x + y).tolist(), lambda: x.numpy(), lambda: (x * 2).sum().item()):
            try:
                f()
            except pr.DeviceError as e:
                print("error:", "previous device" in str(e))
            except Exception as e:
                print("raw:", type(e).__name__, e)
        print((y + 1).tolist())
        """
    )
    assert out.count("error: True") == 3, out
    assert "raw:" not in out and "[2.0, 2.0, 2.0, 2.0]" in out, out
