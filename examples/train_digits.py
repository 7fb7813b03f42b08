"""Train a small classifier on scikit-learn's handwritten digits with pyrite — a PyTorch script
with `torch` spelled `pyrite`.

    python examples/train_digits.py [--steps 600] [--batch-size 64] [--out runs/digits] [--compile]

The data (1,797 8x8 images, bundled with scikit-learn: nothing is downloaded) is split 80/20;
the model trains with AdamW and a cosine schedule, shows a progress bar with loss and
throughput, evaluates on the held-out fifth beside the majority-class baseline, writes a loss
curve (loss.png) and a checkpoint (model.safetensors), loads the checkpoint into a fresh model
and evaluates it again to the same accuracy, and exports the model as a browser bundle (web/:
`pyrite web runs/digits/web` serves a page to draw a digit on). With `--compile` the training
step (forward, backward, clipping, optimizer and schedule) is `torch.compile`d: traced on its
first calls, replayed in one submission after. `pyrite train` runs this file.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

import pyrite as torch
import pyrite.nn as nn
import pyrite.nn.functional as F
from pyrite.utils.data import DataLoader, TensorDataset


def load_digits_split(seed: int = 0):
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)  # (1797, 64) in [0, 1]
    y = digits.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(x))
    cut = int(0.8 * len(x))
    return (x[order[:cut]], y[order[:cut]]), (x[order[cut:]], y[order[cut:]])


def make_model(hidden: int = 128) -> nn.Module:
    return nn.Sequential(
        nn.Linear(64, hidden),
        nn.GELU(),
        nn.LayerNorm(hidden),
        nn.Dropout(0.1),
        nn.Linear(hidden, hidden),
        nn.GELU(),
        nn.Linear(hidden, 10),
    )


def evaluate(model: nn.Module, x, y) -> float:
    model.eval()
    with torch.no_grad():
        logits = model(torch.tensor(x))
        pred = logits.argmax(1).numpy()
    model.train()
    return float((pred == y).mean())


def train(
    steps=600,
    batch_size=64,
    lr=3e-3,
    out="runs/digits",
    seed=0,
    data=None,
    quiet=False,
    compile=False,
):
    """Train, evaluate, checkpoint, reload; returns a dict of the figures (also written to
    `out`/result.json)."""
    from tqdm import tqdm

    torch.manual_seed(seed)
    (xtr, ytr), (xte, yte) = data if data is not None else load_digits_split(seed)
    os.makedirs(out, exist_ok=True)
    model = make_model()
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=1e-2)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps)
    loader = DataLoader(
        TensorDataset(torch.tensor(xtr), torch.tensor(ytr)),
        batch_size=batch_size,
        shuffle=True,
        drop_last=True,
        generator=torch.Generator().manual_seed(seed),
    )

    def train_step(xb, yb):
        loss = F.cross_entropy(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        return loss

    if compile:
        train_step = torch.compile(train_step)
    losses = []
    step = 0
    t0 = time.perf_counter()
    bar = tqdm(total=steps, desc="train", unit="step", disable=quiet)
    while step < steps:
        for xb, yb in loader:
            loss = train_step(xb, yb)
            step += 1
            if step % 10 == 0 or step == steps:
                losses.append((step, loss.item()))
                rate = step * batch_size / (time.perf_counter() - t0)
                bar.set_postfix(loss=f"{losses[-1][1]:.4f}", samples_s=f"{rate:.0f}")
            bar.update(1)
            if step >= steps:
                break
    bar.close()
    seconds = time.perf_counter() - t0
    acc = evaluate(model, xte, yte)
    baseline = float((yte == np.bincount(ytr).argmax()).mean())
    path = os.path.join(out, "model.safetensors")
    torch.save(model.state_dict(), path)
    fresh = make_model()
    fresh.load_state_dict(torch.load(path))
    acc_reloaded = evaluate(fresh, xte, yte)
    _plot(losses, os.path.join(out, "loss.png"))
    web = export_web(model, xte, yte, out)
    result = {
        "device": torch.device_info().get("name"),
        "steps": steps,
        "seconds": round(seconds, 2),
        "ms_per_step": round(1000 * seconds / steps, 2),
        "final_loss": losses[-1][1],
        "test_accuracy": acc,
        "baseline_accuracy": baseline,
        "reloaded_accuracy": acc_reloaded,
        "checkpoint": path,
        "web": web,
        "compiled": bool(compile),
    }
    if compile:  # kernels a replayed step, replays, graph breaks (none expected)
        s = train_step.stats()
        result["compile"] = {k: s.get(k) for k in ("kernels", "replays", "graph_breaks")}
    with open(os.path.join(out, "result.json"), "w") as f:
        json.dump(result, f, indent=1)
    if not quiet:
        print(
            f"device {result['device']}: {steps} steps in {seconds:.1f} s "
            f"({result['ms_per_step']} ms/step); test accuracy {acc:.3f} "
            f"(majority-class baseline {baseline:.3f}); checkpoint {path} reloaded: "
            f"{acc_reloaded:.3f}; loss curve {os.path.join(out, 'loss.png')}; in a browser: "
            f"pyrite web {web}"
        )
    return result


def export_web(model, xte, yte, out) -> str:
    """The trained classifier as a browser bundle (pyrite.web: pyrite's own kernels, run by
    WebGPU in a page), with a page to draw a digit on and 40 held-out test images to show.
    `pyrite web FOLDER` serves it; the folder works from any static web server."""
    import shutil

    from pyrite import web

    folder = os.path.join(out, "web")
    model.eval()
    web.export(
        lambda x: model(x).softmax(-1),
        torch.tensor(xte[:1]),
        folder,
        input_names=["pixels"],
        output_names=["probabilities"],
    )
    model.train()
    with open(os.path.join(folder, "digits.json"), "w") as f:
        json.dump({"images": xte[:40].round(4).tolist(), "labels": yte[:40].tolist()}, f)
    here = os.path.dirname(os.path.abspath(__file__))
    shutil.copyfile(os.path.join(here, "digits_draw.html"), os.path.join(folder, "draw.html"))
    return folder


def _plot(losses, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s, v = zip(*losses)
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(s, v)
    ax.set_xlabel("step")
    ax.set_ylabel("training loss (cross-entropy)")
    ax.set_yscale("log")
    ax.set_title("pyrite: MLP on scikit-learn digits")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--out", default="runs/digits", help="folder for the checkpoint and plot")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--compile", action="store_true", help="torch.compile the training step")
    a = p.parse_args(argv)
    r = train(a.steps, a.batch_size, a.lr, a.out, a.seed, compile=a.compile)
    return 0 if r["reloaded_accuracy"] == r["test_accuracy"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
