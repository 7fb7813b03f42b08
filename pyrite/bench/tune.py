"""`pyrite tune`: measure every fast GEMM tile and split of K for product shapes on this device
and keep the winners (ops/tuning.py's cache), so later products of those shapes take them.

    pyrite tune --model bert          # BERT-base's linear layers at batch 1 and 32 x 128 tokens
    pyrite tune --model gpt           # the small GPT's forward and backward products
    pyrite tune --shapes 128x768x2304:k,512x128x512:mn [--reps 20]

A shape is MxNxK with the fast kernel's layout ("k": x @ w.T, a linear layer's forward; "n":
a @ b, its input's gradient g @ w; "mn": g.T @ x, its weight's gradient; "mk"). Each candidate is
checked against float64 numpy (within the dot product's bound, K·2⁻²⁴·|a|·|b|, doubled) and
timed by pr.profiler's timestamp queries as the device time of `reps` products back to back
(both kernels of a split); a wrong candidate is reported and never kept. The table gives the
rules' choice beside the winners.
"""

from __future__ import annotations

import argparse
import json

import numpy as np

PRESETS = {
    "bert": [
        (m, k, n, "k")
        for m in (128, 4096)
        for k, n in ((768, 2304), (768, 768), (768, 3072), (3072, 768))
    ],
    "gpt": [
        *((512, k, n, "k") for k, n in ((128, 384), (128, 128), (128, 512), (512, 128))),
        *((512, n, k, "n") for k, n in ((128, 384), (128, 128), (128, 512), (512, 128))),
        *((n, k, 512, "mn") for k, n in ((128, 384), (128, 128), (128, 512), (512, 128))),
    ],
}
SPLITS = (1, 2, 4, 8, 16)


def parse_shapes(text: str):
    out = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        dims, _, lay = part.partition(":")
        try:
            M, N, K = (int(v) for v in dims.lower().split("x"))
        except ValueError:
            raise SystemExit(f"pyrite tune: a shape is MxNxK[:layout], not {part!r}") from None
        lay = lay or "k"
        if lay not in ("k", "n", "mk", "mn"):
            raise SystemExit(f"pyrite tune: layout {lay!r} is not one of k, n, mk, mn")
        out.append((M, N, K, lay))
    return out


def _operands(pr, M, N, K, lay, rng):
    """(a, b, a64, b64): pyrite operands of an M x K by K x N product in `lay`, and float64."""
    a64 = rng.standard_normal((M, K))
    b64 = rng.standard_normal((K, N)) / np.sqrt(K)
    a = (
        pr.tensor(a64.astype(np.float32))
        if lay[0] != "m"
        else pr.tensor(np.ascontiguousarray(a64.T).astype(np.float32)).t()
    )
    b = (
        pr.tensor(b64.astype(np.float32))
        if lay[-1] == "n"
        else pr.tensor(np.ascontiguousarray(b64.T).astype(np.float32)).t()
    )
    return a, b, a64, b64


def _device_us(pr, fn, reps):
    """Median microseconds of device time a call over `reps` calls profiled back to back,
    after as many unprofiled ones and a warm-up that brings the GPU's clocks back, every time
    (pyrite.bench.warm_gpu(0.0): a few warm calls do not, and the candidate's pipeline build and
    correctness check just before are host work long enough for an H100 to drop its clock).
    Before 2026-12-05 the warm-up ran only after a second of idling, and that night's tune
    (docs/bench/2026-12-05-h100-s28-tune-all.json) timed tiles at 3-4x what
    scripts/gemm_tile_ab.py's always-warmed timings gave for the same products."""
    from . import _busy, warm_gpu

    warm_gpu(0.0)
    for _ in range(reps):
        fn()
    pr.synchronize()
    with pr.profiler.profile() as prof:
        for _ in range(reps):
            fn()
    events = prof.events()
    per = len(events) // reps if reps else 0
    calls = [sum(e.device_ns for e in events[k * per : (k + 1) * per]) / 1e3 for k in range(reps)]
    _busy()
    return float(np.median(calls)) if calls else 0.0


def tune_shape(M, N, K, lay, reps=10, tiles=None, splits=SPLITS, progress=None):
    """Time every fitting candidate for one shape; returns (entry, report) where entry is
    ops/tuning.py's ({"tile", "us", "tile_split", "split", "us_split", "rule_us", "sig"}) or
    None when no fast tile fits, and report lists (label, microseconds or None when wrong)."""
    import pyrite as pr
    from pyrite.ops import matmul as mm

    from .gemm_small import FAST_TILES

    dev = pr.backend.current()
    rng = np.random.default_rng(0)
    a, b, a64, b64 = _operands(pr, M, N, K, lay, rng)
    want = a64 @ b64
    bound = 2 * K * 2.0**-24 * (np.abs(a64) @ np.abs(b64)) + 1e-30
    got_lay = mm._fast_layout(a, b, None, pr.float32, [(), (), ()])
    if got_lay != lay:
        raise RuntimeError(f"pyrite tune: internal: operands laid out {got_lay}, not {lay}")
    report, best, best_split = [], None, None
    saved = mm.FORCE, mm.FORCE_SPLIT
    try:
        mm.FORCE = mm.FORCE_SPLIT = None
        rule_us = _device_us(pr, lambda: a @ b, reps)
        report.append(("rules", rule_us))
        for tile in tiles or FAST_TILES:
            for S in splits:
                if S == 1:
                    if not mm._fast_fits(dev, tile, lay, M, N, K):
                        continue
                    mm.FORCE, mm.FORCE_SPLIT = ("fast", tile), (1, ("fast", tile))
                else:
                    if not mm._split_fits(dev, S, ("fast", tile), M, N, K, lay):
                        continue
                    mm.FORCE, mm.FORCE_SPLIT = None, (S, ("fast", tile))
                label = f"{tile} S={S}"
                if progress is not None:
                    progress(label)
                err = np.abs((a @ b).numpy() - want)
                if not (err <= bound).all():
                    report.append((label, None))
                    continue
                us = _device_us(pr, lambda: a @ b, reps)
                report.append((label, us))
                if S == 1 and (best is None or us < best[1]):
                    best = (tile, us)
                if best_split is None or us < best_split[2]:
                    best_split = (tile, S, us)
        if best is None:
            return None, report
        entry = {
            "tile": list(best[0]),
            "us": round(best[1], 3),
            "tile_split": list(best_split[0]),
            "split": best_split[1],
            "us_split": round(best_split[2], 3),
            "rule_us": round(rule_us, 3),
        }
        kept = keep(entry)
        if kept is not None:  # (what these times were measured against, the rules unforced)
            mm.FORCE = mm.FORCE_SPLIT = None
            kept["sig"] = mm.tune_signature(dev, lay, M, N, K, kept)
        return kept, report
    finally:
        mm.FORCE, mm.FORCE_SPLIT = saved


# A winner replaces the rules only where it beats them by more than this (timing noise).
MARGIN = 0.97


def keep(entry):
    """The entry as kept: its eager tile only where it beats the rules (else None: the rules
    keep the shape), its split only where that beats both; None where neither stands, or where
    the device's timestamps were too coarse to tell (a zero time: Dawn on the H200 rounds to
    65.5 µs)."""
    if entry is None or entry["rule_us"] <= 0 or entry["us"] <= 0 or entry["us_split"] <= 0:
        return None
    out = dict(entry)
    if entry["us"] >= MARGIN * entry["rule_us"]:
        out["tile"] = None
    if entry["split"] <= 1 or entry["us_split"] >= MARGIN * min(entry["us"], entry["rule_us"]):
        out["split"], out["tile_split"] = 1, None
    if out["tile"] is None and out["split"] == 1:
        return None
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="pyrite tune", description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", choices=sorted(PRESETS), action="append", default=[])
    ap.add_argument("--shapes", default="", help="MxNxK[:layout],... (layout k, n, mk, mn)")
    ap.add_argument("--reps", type=int, default=10, help="products timed a candidate")
    ap.add_argument("--json", default=None, help="also write every candidate's time here")
    ap.add_argument("--dry-run", action="store_true", help="measure, keep nothing")
    args = ap.parse_args(argv)
    shapes = parse_shapes(args.shapes)
    for m in args.model:
        shapes += PRESETS[m]
    if not shapes:
        ap.error("give --model or --shapes")
    import pyrite as pr
    from pyrite.ops import tuning

    dev = pr.backend.current()
    if "timestamp-query" not in dev.features:
        print("pyrite tune: this adapter has no timestamp queries: times are wall times")
    try:
        from tqdm import tqdm
    except ImportError:  # (tqdm is optional: a line a shape instead)
        tqdm = None
    print(f"pyrite tune on {dev.name} ({dev.impl}): {len(shapes)} shapes")
    entries, full = {}, {}
    bar = tqdm(total=len(shapes), unit="shape") if tqdm is not None else None
    for M, N, K, lay in shapes:
        name = tuning.entry_key(lay, M, N, K)
        if bar is not None:
            bar.set_description(name)

            def progress(label, bar=bar):
                bar.set_postfix_str(label)
        else:
            progress = None
            print(f"  {name} ...", flush=True)
        entry, report = tune_shape(M, N, K, lay, args.reps, progress=progress)
        full[name] = report
        if entry is not None:
            entries[name] = entry
        elif any(us == 0 for _, us in report):
            print(f"  {name}: timestamps too coarse on this device to rank candidates: not kept")
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    print(f"\n{'shape':>22}  {'rules':>9}  {'best tile':>9}  {'best split':>10}  winner")
    for name, e in entries.items():
        tile = "rules" if e["tile"] is None else tuple(e["tile"])
        split = (
            "no split" if e["tile_split"] is None else f"{tuple(e['tile_split'])} S={e['split']}"
        )
        print(
            f"{name:>22}  {e['rule_us']:7.2f}us  {e['us']:7.2f}us  {e['us_split']:8.2f}us  "
            f"eager {tile} / compiled {split}"
        )
    for name, report in full.items():
        for label, us in report:
            if us is None:
                print(f"  {name} {label}: WRONG (outside the dot-product bound): not kept")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": tuning.device_key(dev), "entries": entries, "all": full}, f)
    if entries and not args.dry_run:
        tuning.store(dev, entries)
        print(f"kept {len(entries)} entries in {tuning.cache_path()} ($PYRITE_TUNE_CACHE)")
    return 0
