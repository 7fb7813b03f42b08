"""Wall time of pyrite.models.LlamaForCausalLM's generation at a real model's shape, random
weights (no download): the prompt's forward (prefill) and tokens a second while decoding with
the KV cache, float32 and with int4 (group 32, GGUF Q4_0's layout) or int8 projections.

    python scripts/llama_decode_time.py                       # TinyLlama-1.1B's shape
    python scripts/llama_decode_time.py --tiny                # a small shape (lavapipe)
    python scripts/llama_decode_time.py --formats f32,int4 --prompt 128 --new 64 --json out.json

Each format runs eagerly and with generate(compile=True) (the one-token step recorded once by
pr.compile and replayed: one submission a token).

Each figure is the median of --reps generations after one warm-up; the decode rate is
(new - 1) tokens over the time after the first new token (which the prefill produces).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import numpy as np

import pyrite as pr
from pyrite.models import LlamaConfig, LlamaForCausalLM
from pyrite.quantization import Int4WeightOnlyConfig, Int8WeightOnlyConfig, quantize_

TINYLLAMA = dict(
    vocab_size=32000,
    hidden_size=2048,
    intermediate_size=5632,
    num_hidden_layers=22,
    num_attention_heads=32,
    num_key_value_heads=4,
    max_position_embeddings=2048,
)
TINY = dict(
    vocab_size=512,
    hidden_size=128,
    intermediate_size=352,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=256,
)


def _model(cfg, fmt):
    pr.manual_seed(0)
    m = LlamaForCausalLM(LlamaConfig(**cfg)).eval()
    with pr.no_grad():
        for p in m.parameters():
            p.normal_(0, 0.02)
    if fmt == "int4":
        quantize_(m, Int4WeightOnlyConfig(group_size=32))
    elif fmt == "int8":
        quantize_(m, Int8WeightOnlyConfig())
    return m


def _time_generate(m, ids, new, reps, compiled=False):
    """(prefill seconds, decode tokens a second), medians over reps."""
    pre, dec = [], []
    for r in range(reps + 1):
        pr.synchronize()
        t0 = time.perf_counter()
        with pr.inference_mode():
            m(ids)[:, -1].argmax(-1).numpy()
        t1 = time.perf_counter()
        out = m.generate(ids, max_new_tokens=new, eos_token_id=-1, compile=compiled)
        out.numpy()
        t2 = time.perf_counter()
        if r:  # (the first is the warm-up: kernels compile)
            pre.append(t1 - t0)
            # generate = prefill + (new - 1) decode steps
            dec.append((new - 1) / max(t2 - t1 - (t1 - t0), 1e-9))
    return statistics.median(pre), statistics.median(dec)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--formats", default="f32,int4,int8")
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--new", type=int, default=32)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--json")
    ap.add_argument(
        "--ab-fuse-gemv",
        action="store_true",
        help="time the compiled decoding without and with maps fused into the GEMVs' stores "
        "(compile/fusion.FUSE_GEMV), each on a fresh recording",
    )
    a = ap.parse_args(argv)
    cfg = TINY if a.tiny else TINYLLAMA
    rows = []
    ids = pr.tensor(np.random.default_rng(0).integers(0, cfg["vocab_size"], (1, a.prompt)))
    print(f"{pr.get_device_name() if hasattr(pr, 'get_device_name') else ''} shape {cfg}")
    for fmt in a.formats.split(","):
        t0 = time.perf_counter()
        m = _model(cfg, fmt)
        built = time.perf_counter() - t0
        modes = [(False, None), (True, None)]
        if a.ab_fuse_gemv:
            modes = [(False, None), (True, False), (True, True)]
        for compiled, fuse in modes:
            if fuse is not None:
                from pyrite.compile import fusion
                from pyrite.models import _generate

                fusion.FUSE_GEMV = fuse
                _generate._STATIC.pop(m, None)  # (a fresh recording, fused or not)
            pre, rate = _time_generate(m, ids, a.new, a.reps, compiled)
            name = fmt + (" compiled" if compiled else "")
            name += {None: "", False: " unfused", True: " fused"}[fuse]
            rows.append(
                dict(
                    format=fmt,
                    compiled=compiled,
                    prompt=a.prompt,
                    new=a.new,
                    fuse_gemv=fuse,
                    prefill_ms=pre * 1e3,
                    decode_tok_s=rate,
                )
            )
            print(
                f"{name:22s} prefill {a.prompt} tokens {pre * 1e3:8.1f} ms   decode {rate:7.1f}"
                f" tok/s ({1e3 / rate:6.2f} ms a token; model built in {built:.1f} s)"
            )
            sys.stdout.flush()
        del m
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
