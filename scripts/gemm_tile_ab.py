"""GPU time (timestamp queries, scripts/gpu_time.py) of every GEMM tile of
pyrite.bench.gemm_variants, each forced, at BERT-base's linears and 4096^3, beside the rule's
choice: the table ops/matmul.FAST_GPU is filled from this.
`PYRITE_BACKEND=wgpu|dawn python scripts/gemm_tile_ab.py [--json PATH] [--shapes M,N,K;...]
    [--variants NAME;NAME...] [--f16 [--acc16]] [--matmul]` (names as in gemm_variants, "auto" is
the rule; `--matmul`: x @ w with w (K, N), the bench's `a @ b`, in place of F.linear;
`--f16`: float16 storage, `--acc16`: with f16 arithmetic, ops/matmul.F16_ACCUMULATION;
`--acc16-sums`: f16 sums across the whole of K, F16_ACCUMULATION = "sums"; `--bake`: each
shape's sizes and strides baked into its kernels, ops/matmul.BAKE). A variant "rule TILE [minT]"
(TILE spelt as after "fast") is the rule with TILE as its big tile (`use_big_tile`), taken also
at T tiles or more whatever its waves' fill (ops/matmul.BIG_MIN_TILES); "slotsS": its waves
counted in S workgroups (ops/matmul.GPU_SLOTS)."""

import json
import re
import sys

import numpy as np

import pyrite as pr
import pyrite.ops.matmul as mmod
from pyrite import backend
from pyrite.bench.gemm_variants import VARIANTS

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from gpu_time import kernel_times  # noqa: E402
from half_gemm_time import torch_us  # noqa: E402

F = pr.nn.functional
SHAPES = [(4096, 768, 768), (4096, 3072, 768), (4096, 768, 3072), (4096, 2304, 768),
          (4096, 4096, 4096)]  # fmt: skip


def parse_tile(name):
    """("fast", tile) from a name "fast BMxBN TMxTN kBK [db|db2|dbu|dbu2|dbub] [kgG]" (gemm_variants'
    spelling; dbu / dbu2 / dbub: gemm_fast's unconditional prefetch, dbuf = 3 / 4 / 5), so
    --variants can name tiles the bench's list does not hold."""
    words = name.split()
    if len(words) < 4 or words[0] != "fast":
        return None
    bm, bn = (int(v) for v in words[1].split("x"))
    tm, tn = (int(v) for v in words[2].split("x"))
    kg = next((int(w[2:]) for w in words[4:] if w.startswith("kg")), 1)
    codes = {"db2": 2, "dbu": 3, "dbu2": 4, "dbub": 5, "db": True}
    db = next((codes[w] for w in words[4:] if w in codes), False)
    tile = (bm, bn, tm, tn, int(words[3][1:]), db)
    return ("fast", tile + (kg,) if kg > 1 else tile)


def use_big_tile(tile, min_tiles=0, slots=None):
    """The rule with `tile` in place of its big tile (in BIG_TILE and in the tables that hold
    it, which took its value at import), also taken at `min_tiles` tiles or more, its waves
    counted in `slots` workgroups (GPU_SLOTS); the plans made with the one before forgotten.
    Returns what to pass back to undo it."""
    old = (mmod.BIG_TILE, mmod.BIG_MIN_TILES, mmod.GPU_SLOTS)
    for table in (mmod.FAST_GPU, mmod.FAST_GPU_DAWN):
        table[:] = [(least, tile if p == mmod.BIG_TILE else p) for least, p in table]
    mmod.BIG_TILE, mmod.BIG_MIN_TILES = tile, min_tiles
    mmod.GPU_SLOTS = slots or mmod.GPU_SLOTS
    mmod._plans.clear()
    return old


def parse_rule(name):
    """(tile, min_tiles, slots) from a variant "rule TILE [minT] [slotsS]", else None."""
    words = name.split()
    if not words or words[0] != "rule":
        return None
    opts, spelt = {}, ["fast"]
    for w in words[1:]:
        m = re.fullmatch(r"(min|slots)(\d+)", w)
        if m:
            opts[m[1]] = int(m[2])
        else:
            spelt.append(w)
    return parse_tile(" ".join(spelt))[1], opts.get("min", 0), opts.get("slots")


def main():
    dev = backend.current()
    print(f"{dev.name} ({dev.impl})")
    shapes = SHAPES
    if "--shapes" in sys.argv:
        arg = sys.argv[sys.argv.index("--shapes") + 1]
        shapes = [tuple(int(v) for v in s.split(",")) for s in arg.split(";")]
    rng = np.random.default_rng(0)
    rows = []
    dt = pr.float16 if "--f16" in sys.argv else pr.float32
    mmod.F16_ACCUMULATION = "sums" if "--acc16-sums" in sys.argv else "--acc16" in sys.argv
    mmod.BAKE = "--bake" in sys.argv
    half = bool(mmod.F16_ACCUMULATION) and dt is pr.float16
    for M, N, K in shapes:
        x = pr.tensor(rng.standard_normal((M, K)).astype(np.float32)).to(dt)
        w = pr.tensor(rng.standard_normal((N, K)).astype(np.float32)).to(dt)
        if "--matmul" in sys.argv:  # x @ w2, w2 (K, N) N-contiguous: the bench's a @ b
            w2, lay = pr.tensor(rng.standard_normal((K, N)).astype(np.float32)).to(dt), "n"

            def op():
                return x @ w2
        else:
            lay = "k"

            def op():
                return F.linear(x, w, b)

        b = pr.tensor(rng.standard_normal(N).astype(np.float32)).to(dt)
        row = {"shape": [M, N, K]}
        pick = (
            sys.argv[sys.argv.index("--variants") + 1].split(";")
            if "--variants" in sys.argv
            else None
        )
        known = dict(VARIANTS)
        extra = [(n, parse_tile(n)) for n in pick or () if n not in known and parse_tile(n)]
        rules = [(n, None) for n in pick or () if parse_rule(n)]
        for name, force in VARIANTS + extra + rules:
            if pick is not None and name not in pick:
                continue
            if force is not None and force[0] != "fast":
                continue
            if force is not None and not mmod._fast_fits(dev, force[1], lay, M, N, K, half):
                continue
            mmod.FORCE = force
            rule = parse_rule(name)
            undo = use_big_tile(*rule) if rule else None
            try:
                us = sum(t for t, *_ in kernel_times(op, reps=9)) / 1e3
            finally:
                mmod.FORCE = None
                if undo:
                    use_big_tile(*undo)
            row[name] = us
        tus = torch_us(M, N, K, "float16" if dt is pr.float16 else "float32")
        if tus is not None:
            row["torch-cuda"] = tus
        rows.append(row)
        best = min((v, k) for k, v in row.items() if k not in ("shape", "torch-cuda"))
        auto = row.get("auto", best[0])
        tf = 2 * M * N * K / (auto * 1e-6) / 1e12
        print(f"{M}x{K} . {N}x{K}T: auto {auto:.1f} us ({tf:.1f} TFLOP/s), "
              f"best {best[1]} {best[0]:.1f}")  # fmt: skip
        for k, v in sorted(row.items(), key=lambda kv: kv[1] if kv[0] != "shape" else 0):
            if k != "shape":
                print(f"    {k:<28} {v:9.1f}")
    if "--json" in sys.argv:
        with open(sys.argv[sys.argv.index("--json") + 1], "w") as f:
            json.dump({"device": dev.name, "impl": dev.impl, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
