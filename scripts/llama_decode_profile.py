"""Where a decoded token's time goes, at TinyLlama-1.1B's shape (random weights): the eager
one-token step under pr.profiler (each kernel's GPU time, grouped by kernel family, summed over
a step), then the compiled static step (generate(compile=True)'s) timed two ways: replays back
to back with one wait, and each replay followed by reading its argmax (as generate does).

    python scripts/llama_decode_profile.py [--tiny] [--formats f32,int4] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from llama_decode_time import TINY, TINYLLAMA, _model  # noqa: E402  (scripts/ is on sys.path)

import pyrite as pr
from pyrite.models import KVCache
from pyrite.models._generate import static_step


def _eager_profile(m, cfg, prompt, rows):
    cache = KVCache(m.config, 1, prompt + 8)
    ids = pr.tensor(np.arange(prompt)[None] % cfg["vocab_size"])
    with pr.inference_mode():
        m(ids, cache)
        tok = pr.tensor([[5]])
        for _ in range(2):  # (warm: pipelines built, clocks up)
            m(tok, cache)
        pr.synchronize()
        with pr.profiler.profile() as prof:
            for _ in range(3):
                m(tok, cache)
            pr.synchronize()
    avgs = prof.key_averages(group_by="kernel")
    total = sum(a.device_time_total for a in avgs) / 3
    n = sum(a.count for a in avgs) / 3
    print(f"  eager step: {n:.0f} kernels, {total / 1e3:.2f} ms of GPU time a token")
    print(prof.key_averages(group_by="kernel").table(sort_by="device_time_total", row_limit=rows))
    return {"kernels": n, "gpu_ms": total / 1e3}


def _compiled(m, prompt, reps):
    step, cache, keys = static_step(m, 1, prompt + 2 * reps + 8, pr.float32)
    cf = pr.compile(step)
    i32 = lambda v: pr.tensor(np.asarray(v, np.int32))  # noqa: E731
    with pr.inference_mode():
        args = (i32([[5]]), i32([prompt]), i32([[prompt]]))
        for _ in range(3):
            cf(*args)
        pr.synchronize()
        t0 = time.perf_counter()
        for _ in range(reps):
            out = cf(*args)
        pr.synchronize()
        queued = (time.perf_counter() - t0) / reps
        t0 = time.perf_counter()
        for _ in range(reps):
            int(cf(*args)[0, -1].argmax())
        read = (time.perf_counter() - t0) / reps
    del out
    kernels = cf.stats().get("kernels")
    print(
        f"  compiled step ({kernels} kernels): {queued * 1e3:.2f} ms a step queued back to "
        f"back, {read * 1e3:.2f} ms with the argmax read each step"
    )
    return {"kernels": kernels, "queued_ms": queued * 1e3, "read_ms": read * 1e3}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--formats", default="f32,int4")
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--rows", type=int, default=14)
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    cfg = TINY if a.tiny else TINYLLAMA
    out = {}
    for fmt in a.formats.split(","):
        print(f"{fmt}:")
        m = _model(cfg, fmt)
        out[fmt] = {
            "eager": _eager_profile(m, cfg, a.prompt, a.rows),
            "compiled": _compiled(m, a.prompt, a.reps),
        }
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
