"""`pr.compile` against eager: the issue's three models, each eager and compiled, beside PyTorch.

- MLP 784-256-10 training step (AdamW, batch 128) and the small GPT training step (2 layers,
  d=128, 4 heads, T=64, batch 8, AdamW): bench/train.py's models, the step compiled whole
  (forward, backward, optimizer step); and again with only the model compiled
  (`model = pr.compile(model)`, the step eager around it: the forward and its backward replay,
  compile/_aot.py) beside `torch.compile(model)`. The GPT's step also reads its loss inside
  (`loss.item()`, a graph break: the compiled step reruns its Python over the recording,
  backend/replay.Rerun) beside the same eager step and PyTorch's.
- BERT-base encoder forward at batch 1 x 128 tokens under no_grad (bench/bert.py's model),
  latency-bound: the module compiled.

Each figure is the median milliseconds of one call with calls back to back and one
synchronisation per timing (bench/train.py's `_time`); the compiled rows also give kernels per
call and the recording's planned memory against what its trace allocated (each allocation
counted, nothing reused). PyTorch CUDA eager and `torch.compile` are timed in the same run where
a GPU is there (`PYRITE_BENCH_TORCH_COMPILE=0` skips torch.compile, whose first call takes tens
of seconds).
"""

from __future__ import annotations

import os

import numpy as np

from .train import _gpt, _mlp, _time


def _note(stats) -> str:
    mib = 1 / (1 << 20)
    return (
        f"{stats['kernels']} kernels a call, planned {stats['planned_bytes'] * mib:.1f} MiB "
        f"vs {stats['unplanned_bytes'] * mib:.1f} MiB unplanned"
        + (
            f"; its Python reruns over {stats['segments']} segments"
            if stats.get("mode") == "rerun"
            else ""
        )
    )


def bench_compile(rep, quick=False):
    import pyrite as pr

    from .bert import build as bert

    try:
        import torch
    except Exception:  # noqa: BLE001
        torch = None
    cuda = torch is not None and torch.cuda.is_available()
    tc = cuda and os.environ.get("PYRITE_BENCH_TORCH_COMPILE", "1") != "0"
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((128, 784)).astype(np.float32)
    ys = rng.integers(0, 10, 128)
    idx = rng.integers(0, 256, (8, 64))
    tgt = rng.integers(0, 256, (8, 64))
    hs = rng.standard_normal((1, 128, 768)).astype(np.float32)
    layers = 2 if quick else 12

    def train_case(build, data):
        def make(L, dev, compiled):
            """compiled: False, True (the whole step) or "model" (`model = L.compile(model)`,
            the step eager around it)."""
            model = compiled == "model"
            if L is pr:
                step = build(L, *data(L, dev), compile_model=model)
            else:
                with torch.device(dev):
                    step = build(L, *data(L, dev), compile_model=model)
            if model:
                return step, step.model
            if compiled:
                step = (pr.compile if L is pr else torch.compile)(step)
            return step, None

        make.model = True
        return make

    def reading(make):
        """The same step reading its loss back inside (`loss.item()` every step)."""

        def make_reading(L, dev, compiled):
            step, _ = make(L, dev, False)

            def read():
                return step().item()

            if compiled:
                read = (pr.compile if L is pr else torch.compile)(read)
            return read, None

        return make_reading

    def bert_case(L, dev, compiled):
        if L is pr:
            model = bert(pr, layers=layers)
            x = pr.tensor(hs)
        else:
            with torch.device(dev):
                model = bert(torch, layers=layers)
            x = torch.tensor(hs, device=dev)
        if compiled:
            model = (pr.compile if L is pr else torch.compile)(model)

        def fwd():
            with L.no_grad():
                return model(x)

        return fwd, model

    cases = {
        "MLP 784-256-10 AdamW train step, batch 128": train_case(
            _mlp, lambda L, dev: (L.tensor(xs, device=dev), L.tensor(ys, device=dev))
        ),
        "GPT 2x128 AdamW train step, batch 8x64": train_case(
            _gpt, lambda L, dev: (L.tensor(idx, device=dev), L.tensor(tgt, device=dev))
        ),
        "GPT 2x128 AdamW train step reading its loss inside (a graph break)": reading(
            train_case(_gpt, lambda L, dev: (L.tensor(idx, device=dev), L.tensor(tgt, device=dev)))
        ),
        f"BERT-base forward ({layers} layers), batch 1x128": bert_case,
    }
    n, warm = (3, 3) if quick else (20, 30)
    for name, make in cases.items():
        peers = {}
        if cuda:
            torch.manual_seed(0)
            torch.backends.cuda.matmul.allow_tf32 = False
            step, _ = make(torch, "cuda", False)
            peers["torch-cuda"] = 1e3 * _time(step, torch.cuda.synchronize, n, warm)
            if tc:
                try:
                    step, _ = make(torch, "cuda", True)
                    peers["torch.compile"] = 1e3 * _time(step, torch.cuda.synchronize, n, warm)
                except Exception as exc:  # noqa: BLE001 - no triton, no compiler: say so
                    print(f"  (torch.compile failed: {type(exc).__name__}: {exc}"[:200] + ")")
        pr.manual_seed(0)
        step, _ = make(pr, None, False)
        eager = 1e3 * _time(step, pr.synchronize, n, warm)
        pr.manual_seed(0)
        cstep, model = make(pr, None, True)
        compiled = 1e3 * _time(cstep, pr.synchronize, n, warm)
        stats = (model if model is not None else cstep).stats()
        if "kernels" not in stats:  # (never recorded: say why rather than report eager)
            rep.add(f"compile: {name}: not recorded", eager, "ms", None, {}, str(stats))
            continue
        rep.add(f"compile: {name}, eager", eager, "ms", None, dict(peers), "lower is better")
        rep.add(f"compile: {name}, compiled", compiled, "ms", None, dict(peers), _note(stats))
        if getattr(make, "model", False):  # the model compiled, the step around it eager
            peers = {}
            if tc:
                try:
                    step, _ = make(torch, "cuda", "model")
                    peers["torch.compile(model)"] = 1e3 * _time(
                        step, torch.cuda.synchronize, n, warm
                    )
                except Exception as exc:  # noqa: BLE001
                    print(f"  (torch.compile failed: {type(exc).__name__}: {exc}"[:200] + ")")
            pr.manual_seed(0)
            step, model = make(pr, None, "model")
            t = 1e3 * _time(step, pr.synchronize, n, warm)
            st = model.stats()["training"]
            rep.add(
                f"compile: {name}, model = pr.compile(model), step eager",
                t,
                "ms",
                None,
                peers,
                f"{st.get('kernels_forward')} + {st.get('kernels_backward')} kernels "
                f"(forward + backward) a call, {st.get('eager_calls')} eager calls",
            )
