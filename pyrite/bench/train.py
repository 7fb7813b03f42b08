"""Training steps, eager: forward, backward and AdamW update per step, beside PyTorch.

- MLP 784-256-10 (ReLU), batch 128, cross-entropy, AdamW: the issue's first model.
- A small GPT (2 layers, d=128, 4 heads, T=64, batch 8, vocabulary 256), AdamW: the second.

Each figure is the median milliseconds of one step, after 40 warm-up steps, with the steps of a
timing run back to back and one synchronisation at the end (as a training loop runs); PyTorch CPU
is measured in the same run, PyTorch CUDA eager where a GPU is there.
"""

from __future__ import annotations

import time

import numpy as np


def _time(step, sync, n=10, warmup=40, runs=3):
    """Median seconds of one call over `runs` timings of n calls back to back (one
    synchronisation each), after `warmup` calls."""
    # The steady state of a long run: pyrite's buffer pool settles into the same reuse order
    # within a few tens of steps, and from then on every bind group comes from the device's
    # cache (measured: 130 new groups a GPT step at step 2, 1 by step 36). torch warms up the
    # same way here (its allocator and cuBLAS handles).
    from . import _busy, warm_gpu

    warm_gpu()  # (the GPU's clocks: see pyrite.bench.warm_gpu)
    for _ in range(warmup):
        step()
    sync()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        for _ in range(n):
            step()
        sync()
        times.append((time.perf_counter() - t0) / n)
    _busy()
    return sorted(times)[runs // 2]


def _mlp(L, x, y, compile_model=False):
    """The MLP's training step; `compile_model`: the model under `L.compile` (as in _gpt)."""
    nn = L.nn
    model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10))
    opt = L.optim.AdamW(model.parameters(), lr=1e-3)
    run = L.compile(model) if compile_model else model

    def step():
        loss = nn.functional.cross_entropy(run(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step.model = run
    return step


class _Block:
    """A pre-norm transformer block written with the torch API only (both libraries)."""

    @staticmethod
    def build(L, d, heads, T):
        nn = L.nn

        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.ln1 = nn.LayerNorm(d)
                self.qkv = nn.Linear(d, 3 * d)
                self.proj = nn.Linear(d, d)
                self.ln2 = nn.LayerNorm(d)
                self.fc = nn.Linear(d, 4 * d)
                self.out = nn.Linear(4 * d, d)

            def forward(self, x):
                B = x.shape[0]
                q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
                q = q.reshape(B, T, heads, d // heads).transpose(1, 2)
                k = k.reshape(B, T, heads, d // heads).transpose(1, 2)
                v = v.reshape(B, T, heads, d // heads).transpose(1, 2)
                a = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
                x = x + self.proj(a.transpose(1, 2).reshape(B, T, d))
                return x + self.out(nn.functional.gelu(self.fc(self.ln2(x))))

        return Block


def _gpt(L, idx, tgt, d=128, heads=4, layers=2, T=64, vocab=256, compile_model=False):
    """The small GPT's training step; `compile_model`: the model under `L.compile` (the step
    around it eager: the usual `model = torch.compile(model)`; a dict: pyrite's compile
    options)."""
    nn = L.nn
    Block = _Block.build(L, d, heads, T)

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(vocab, d)
            self.pos = nn.Embedding(T, d)
            self.blocks = nn.ModuleList([Block() for _ in range(layers)])
            self.ln = nn.LayerNorm(d)
            self.head = nn.Linear(d, vocab)

        def forward(self, i):
            x = self.tok(i) + self.pos(L.arange(T, device=i.device))
            for b in self.blocks:
                x = b(x)
            return self.head(self.ln(x))

    model = GPT()
    opt = L.optim.AdamW(model.parameters(), lr=3e-4)
    run = model
    if compile_model:
        opts = compile_model if isinstance(compile_model, dict) else None
        run = L.compile(model, options=opts) if opts else L.compile(model)

    def step():
        logits = run(idx)
        loss = nn.functional.cross_entropy(logits.reshape(-1, vocab), tgt.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step.model = run
    return step


def bench_train(rep):
    import pyrite as pr

    rng = np.random.default_rng(0)
    xs = rng.standard_normal((128, 784)).astype(np.float32)
    ys = rng.integers(0, 10, 128)
    idx = rng.integers(0, 256, (8, 64))
    tgt = rng.integers(0, 256, (8, 64))
    cases = {
        "MLP 784-256-10 AdamW, batch 128": (
            _mlp,
            lambda L, dev: (L.tensor(xs, device=dev), L.tensor(ys, device=dev)),
        ),
        "GPT 2x128, 4 heads, T=64, batch 8, AdamW": (
            _gpt,
            lambda L, dev: (L.tensor(idx, device=dev), L.tensor(tgt, device=dev)),
        ),
    }
    try:
        import torch
    except Exception:  # noqa: BLE001
        torch = None
    for name, (build, data) in cases.items():
        peers = {}
        if torch is not None:
            torch.manual_seed(0)
            peers["torch-cpu"] = 1e3 * _time(build(torch, *data(torch, "cpu")), lambda: None)
            if torch.cuda.is_available():
                args = data(torch, "cuda")
                with torch.device("cuda"):
                    step = build(torch, *args)
                peers["torch-cuda"] = 1e3 * _time(step, torch.cuda.synchronize)
        pr.manual_seed(0)
        ms = 1e3 * _time(build(pr, *data(pr, None)), pr.synchronize)
        rep.add(f"train step: {name}", ms, "ms/step", None, peers, "lower is better")
