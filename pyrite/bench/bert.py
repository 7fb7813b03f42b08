"""BERT-base encoder forward (issue 9's batch-1 row), written once against PyTorch's API so the
same code builds the model in pyrite and in torch.

The layers are BERT's (post-norm): fused q/k/v projection, `scaled_dot_product_attention` over
(B, heads, L, 64) views, output projection, residual + LayerNorm, GELU feed-forward of 3072,
residual + LayerNorm; 12 layers of width 768 and 12 heads, in eval mode under `no_grad`. Weights
are random (the timing does not depend on their values). Each figure is the median milliseconds
of one forward, run back to back and synchronised at the end of each timing (as a server runs
requests). Beside torch CUDA's time, torch CUDA's with its attention on the math path (f32
FMAs, as pyrite's; its fused kernel uses the tensor cores: bench.TORCH_ATTENTION_NOTE). On a CPU adapter (lavapipe) the quick form runs 2 layers at batch 1 only.
"""

from __future__ import annotations

import numpy as np

from .train import _time as train_time


def build(L, d=768, heads=12, ffn=3072, layers=12):
    nn = L.nn
    F = nn.functional

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(d, 3 * d)
            self.proj = nn.Linear(d, d)
            self.ln1 = nn.LayerNorm(d, eps=1e-12)
            self.fc = nn.Linear(d, ffn)
            self.out = nn.Linear(ffn, d)
            self.ln2 = nn.LayerNorm(d, eps=1e-12)

        def forward(self, x):
            B, T, _ = x.shape
            q, k, v = self.qkv(x).split(d, dim=-1)
            q = q.reshape(B, T, heads, d // heads).transpose(1, 2)
            k = k.reshape(B, T, heads, d // heads).transpose(1, 2)
            v = v.reshape(B, T, heads, d // heads).transpose(1, 2)
            a = F.scaled_dot_product_attention(q, k, v)
            x = self.ln1(x + self.proj(a.transpose(1, 2).reshape(B, T, d)))
            return self.ln2(x + self.out(F.gelu(self.fc(x))))

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([Layer() for _ in range(layers)])

        def forward(self, x):
            for layer in self.layers:
                x = layer(x)
            return x

    return Encoder().eval()


def _time(fn, sync, n, warmup=3):
    return train_time(fn, sync, n, warmup, runs=5)


def bench_bert(rep, quick=False):
    import pyrite as pr

    from . import _torch_math_attention

    try:
        import torch
    except Exception:  # noqa: BLE001
        torch = None
    cuda = torch is not None and torch.cuda.is_available()
    layers = 2 if quick else 12
    batches = (1,) if quick else (1, 32)
    for B in batches:
        rng = np.random.default_rng(0)
        xs = rng.standard_normal((B, 128, 768)).astype(np.float32)
        peers = {}
        n = 10 if B == 1 else 3
        if cuda:
            torch.manual_seed(0)
            torch.backends.cuda.matmul.allow_tf32 = False
            with torch.device("cuda"):
                model = build(torch, layers=layers)
            xc = torch.tensor(xs, device="cuda")
            with torch.no_grad():
                peers["torch-cuda"] = 1e3 * _time(lambda: model(xc), torch.cuda.synchronize, n)
                # (its attention on f32 FMAs as pyrite's: bench._torch_math_attention's note)
                math_peer = _torch_math_attention(torch)
                if math_peer is not None:
                    with math_peer:
                        peers["torch-cuda-math"] = 1e3 * _time(
                            lambda: model(xc), torch.cuda.synchronize, n
                        )
        elif torch is not None and quick:
            model = build(torch, layers=layers)
            xc = torch.tensor(xs)
            with torch.no_grad():
                peers["torch-cpu"] = 1e3 * _time(lambda: model(xc), lambda: None, 2, 1)
        pr.manual_seed(0)
        model = build(pr, layers=layers)
        x = pr.tensor(xs)
        with pr.no_grad():
            ms = 1e3 * _time(lambda: model(x), pr.synchronize, n if not quick else 2, 1)
            # the same forward traced once and replayed (issue 9: at or under torch's eager
            # time); checked against the eager output before it is timed
            compiled = pr.compile(model)
            want = model(x).numpy()
            err = float(np.abs(compiled(x).numpy() - want).max())
            if not err <= 1e-4 * max(1.0, float(np.abs(want).max())):
                raise RuntimeError(f"pyrite bench: the compiled BERT forward is off by {err}")
            cms = 1e3 * _time(lambda: compiled(x), pr.synchronize, n if not quick else 2, 1)
        rep.add(
            f"BERT-base encoder fwd, {B}x128 tokens ({layers} layers)",
            ms,
            "ms",
            None,
            peers,
            "lower is better",
        )
        st = compiled.stats()
        rep.add(
            f"the same under pr.compile, {B}x128 tokens",
            cms,
            "ms",
            None,
            peers,
            f"lower is better; {st.get('kernels')} kernels a call",
        )
