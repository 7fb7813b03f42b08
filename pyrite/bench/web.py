"""Browser bundles (pyrite.web) against pyrite itself: three inference workloads exported and
run in headless Chromium's WebGPU, beside the same recording replayed by pyrite on this machine's
device and PyTorch on the CPU.

- the digits classifier of `pyrite train` (64-128-128-10 with GELU and LayerNorm, softmax), one
  image: latency-bound, a handful of kernels;
- a 2-layer Transformer encoder (d=256, 4 heads, FFN 1024), 1 x 64 tokens;
- one decoding step of a 2-layer Llama (d=256, 4 heads, 2 KV heads, a 128-position cache).

Figures are milliseconds of one call: Chromium's with 20 runs queued back to back and one wait
("queued"), and with each run's read-back ("read-back"); pyrite's compiled replay and PyTorch
eager timed as bench/train.py times (median of 3 timings of 10 calls). Chromium runs where a
browser is found (scripts/setup.sh --test installs Debian's chromium); its adapter is its own
(SwiftShader on a machine with no GPU), so beside pyrite on lavapipe only the order of
magnitude means anything there.
"""

from __future__ import annotations

import os
import tempfile

import numpy as np

from .train import _time


def _mlp(nn):
    """The digits classifier, in pyrite's nn or torch's."""
    return nn.Sequential(
        nn.Linear(64, 128), nn.GELU(), nn.LayerNorm(128), nn.Linear(128, 128), nn.GELU(),
        nn.Linear(128, 10),
    ).eval()  # fmt: skip


def _encoder(nn, **kw):
    """The 2-layer encoder, in pyrite's nn or torch's."""
    layer = nn.TransformerEncoderLayer(256, 4, 1024, dropout=0.0, batch_first=True)
    return nn.TransformerEncoder(layer, 2, **kw).eval()


def _cases(pr):
    """(name, function, inputs, the builder of its module or None, that module)."""
    from pyrite.models import LlamaConfig, LlamaForCausalLM
    from pyrite.models._generate import static_step

    pr.manual_seed(0)
    mlp, enc = _mlp(pr.nn), _encoder(pr.nn)
    llama = LlamaForCausalLM(
        LlamaConfig(
            num_hidden_layers=2, hidden_size=256, num_attention_heads=4, num_key_value_heads=2,
            intermediate_size=512, vocab_size=512, max_position_embeddings=128,
        )
    ).eval()  # fmt: skip
    step, _, _ = static_step(llama, 1, 128, pr.float32)
    rng = np.random.default_rng(0)

    def ids(v):
        return pr.tensor(np.asarray(v, np.int32))

    return [
        ("digits MLP, 1 image", lambda x: mlp(x).softmax(-1), (pr.tensor(rng.random((1, 64), np.float32)),), _mlp, mlp),
        ("encoder 2 x d256, 1 x 64 tokens", enc, (pr.randn(1, 64, 256),), _encoder, enc),
        ("Llama d256 decode step", lambda t, s, p: step(t, s, p)[0, -1], (ids([[7]]), ids([5]), ids([[5]])), None, None),
    ]  # fmt: skip


def _torch_twin(build, module):
    """`build`'s module in PyTorch (CPU) with `module`'s weights (the state dict's names are
    torch's), or None without torch."""
    try:
        import torch
    except Exception:  # noqa: BLE001
        return None
    kw = {"enable_nested_tensor": False} if build is _encoder else {}
    t = build(torch.nn, **kw)
    t.load_state_dict({k: torch.tensor(v.numpy()) for k, v in module.state_dict().items()})
    return t.eval()


def bench_web(rep, quick=False):
    import pyrite as pr
    from pyrite import web
    from pyrite.web._browser import find_chromium, run_in_browser

    cases = _cases(pr)
    root = tempfile.mkdtemp(prefix="pyrite-bench-web-")
    folders, replay, peers = [], [], []
    for k, (name, fn, args, build, module) in enumerate(cases):
        folder = os.path.join(root, str(k))
        web.export(fn, args, folder)
        folders.append(folder)
        cf = pr.compile(fn)
        with pr.no_grad():
            replay.append(_time(lambda cf=cf, args=args: cf(*args), pr.synchronize) * 1e3)
        p = {"pyrite replay": replay[-1]}
        twin = _torch_twin(build, module) if build is not None else None
        if twin is not None:
            import torch

            xt = torch.tensor(args[0].numpy())
            with torch.no_grad():
                p["torch-cpu"] = _time(lambda: twin(xt), lambda: None) * 1e3
        peers.append(p)
    exe = find_chromium()
    if exe is None:
        for (name, *_), p in zip(cases, peers):
            rep.add(f"web: {name} (pyrite replay)", p["pyrite replay"], "ms", peers=p,
                    note="no Chromium here: browser not measured")  # fmt: skip
        return
    reports = run_in_browser(folders, timeout=300)
    for (name, *_), p, r in zip(cases, peers, reports):
        if "error" in r:
            rep.rows.append({"name": f"web: {name}", "error": r["error"]})
            continue
        note = f"{r['kernels']} kernels on {r['adapter']} (Chromium)"
        rep.add(f"web: {name}, queued", r["queued_run_ms"], "ms", peers=p, note=note)
        rep.add(f"web: {name}, with read-back", r["run_ms"], "ms", note=note)
