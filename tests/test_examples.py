"""The main job's script (examples/train_digits.py, `pyrite train`) runs end to end: trains,
beats the baseline, writes the plot, the checkpoint and the JSON, and the reloaded checkpoint
evaluates to the same accuracy. Synthetic digits-shaped data here (scikit-learn ships the real
ones; CI need not install it)."""

from __future__ import annotations

import json
import runpy
from pathlib import Path

import numpy as np

SCRIPT = Path(__file__).resolve().parents[1] / "examples" / "train_digits.py"


def _data(rng, centers, n):
    y = rng.integers(0, 10, n)
    x = centers[y] + 0.3 * rng.standard_normal((n, 64)).astype(np.float32)
    return x.astype(np.float32), y


def test_train_digits_script(tmp_path, rng):
    mod = runpy.run_path(str(SCRIPT))
    centers = rng.standard_normal((10, 64)).astype(np.float32)
    data = (_data(rng, centers, 320), _data(rng, centers, 80))
    r = mod["train"](steps=40, batch_size=32, out=str(tmp_path), data=data, quiet=True)
    assert r["test_accuracy"] > max(0.5, 2 * r["baseline_accuracy"]), r
    assert r["reloaded_accuracy"] == r["test_accuracy"]
    for name in ("loss.png", "model.safetensors", "result.json"):
        assert (tmp_path / name).stat().st_size > 0, name
    assert json.loads((tmp_path / "result.json").read_text())["steps"] == 40
    _check_web_bundle(mod, tmp_path, r)


def _check_web_bundle(mod, out, r):
    """The exported browser bundle (web/) gives the reloaded model's probabilities on the
    page's held-out images, and carries the draw page."""
    import pyrite as pr
    from pyrite import web

    folder = Path(r["web"])
    assert folder == out / "web" and (folder / "draw.html").stat().st_size > 0
    shown = json.loads((folder / "digits.json").read_text())
    model = mod["make_model"]()
    model.load_state_dict(pr.load(str(out / "model.safetensors")))
    model.eval()
    bundle = web.load(folder)
    for img in shown["images"][:8]:
        x = np.asarray([img], np.float32)
        got = bundle(x).numpy()
        with pr.no_grad():
            want = model(pr.tensor(x)).softmax(-1).numpy()
        np.testing.assert_allclose(got, want, rtol=0, atol=64 * 2**-24)  # (probabilities <= 1)


def test_train_digits_script_compiled(tmp_path, rng):
    """The same script with its step compiled: replayed (not run eagerly), the same accuracy
    as the eager run on the same data to within one test example in 80 (fusion may change a
    last bit, and a last bit may move one argmax)."""
    mod = runpy.run_path(str(SCRIPT))
    centers = rng.standard_normal((10, 64)).astype(np.float32)
    data = (_data(rng, centers, 320), _data(rng, centers, 80))
    kw = {"steps": 40, "batch_size": 32, "data": data, "quiet": True}
    eager = mod["train"](out=str(tmp_path / "e"), **kw)
    comp = mod["train"](out=str(tmp_path / "c"), compile=True, **kw)
    assert comp["compiled"] and comp["reloaded_accuracy"] == comp["test_accuracy"]
    assert comp["compile"]["replays"] >= 35 and comp["compile"]["graph_breaks"] == []
    assert abs(comp["test_accuracy"] - eager["test_accuracy"]) <= 1 / 80 + 1e-9
    assert abs(comp["final_loss"] - eager["final_loss"]) <= 1e-3 * max(1.0, eager["final_loss"])
