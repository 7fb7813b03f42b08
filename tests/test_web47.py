"""pyrite.web: a compiled function exported as a browser bundle, replayed from its files alone —
by `pyrite.web.load` on pyrite's device, and by `pyrite.js` in headless Chromium with WebGPU
(SwiftShader on a machine with no GPU) — against PyTorch on fresh random inputs of awkward
sizes, across the kernel families a model uses (linear, GEMM, conv, pooling, norms, row ops,
reductions, scans, sorting, gathers, attention, bf16 storage, two language models).

Tolerance (the model tests' rule): a float output may differ from PyTorch's float64 result by 4x
PyTorch float32's own distance from it plus 64 float32 ulps of the output's scale; integer and
bool outputs are exact. A bundle is also run on inputs other than those it was traced with, so
nothing of the example is baked in.

The browser tests need Chromium (scripts/setup.sh --test installs Debian's `chromium`); without
one they skip, except under CI, where they fail."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pytest

import pyrite as pr
import pyrite.nn.functional as F
from pyrite import web
from pyrite.web._browser import find_chromium, run_in_browser

torch = pytest.importorskip("torch")
TF = torch.nn.functional


# ---- cases: one computation written once, run by pyrite (T = pr) and by PyTorch (T = torch) ----
@dataclass
class Case:
    name: str
    fn: Callable  # fn(T, F, *inputs, *weights)
    inputs: Callable  # inputs(rng) -> numpy arrays
    weights: Callable = lambda rng: ()  # bound into the bundle (its model.bin)


def _randn(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def _mlp(T, F, x, w1, b1, g, b, w2, b2):
    h = F.layer_norm(F.gelu(F.linear(x, w1, b1)), (w1.shape[0],), g, b)
    return F.linear(h, w2, b2)


def _rows(T, F, x):
    return (x.softmax(-1), x.log_softmax(0), x.sum(1), x.mean(0), x.amax(1), x.argmax(1), x > 0.3)


def _gemm(T, F, a, b, c, d):
    return a @ b, T.bmm(c, d).relu()


def _cnn(T, F, x, w1, b1, mean, var, g, b, w2):
    h = F.conv2d(x, w1, b1, padding=1)
    h = F.relu(F.batch_norm(h, mean, var, g, b, training=False))
    h = F.conv2d(F.max_pool2d(h, 2), w2, stride=2)
    return T.flatten(F.adaptive_avg_pool2d(h, 1), 1)


def _attention(T, F, q, k, v, q2, k2, v2, mask):
    return (
        F.scaled_dot_product_attention(q, k, v, is_causal=True),
        F.scaled_dot_product_attention(q2, k2, v2, attn_mask=mask > 0),
    )


def _scans(T, F, x):
    return x.cumsum(1), x.sort(1)[0], x.topk(3, 1)[1], T.gather(x, 1, x.argsort(1)[:, :2])


def _select(T, F, x, y):
    return T.where(x > y, x * 2, y.exp()).masked_fill(x < -1, 0.5)


def _embed(T, F, ids, table, w):
    return F.embedding(ids, table) @ w


def _bf16(T, F, x, w):
    return (x.bfloat16() @ w.bfloat16()).float()


def _f16(T, F, x, w):
    return ((x.half() * 3).to(w.dtype) @ w).sum(1)


CASES = [
    Case(
        "mlp",
        _mlp,
        lambda r: (_randn(r, 7, 13),),
        lambda r: (
            _randn(r, 37, 13),
            _randn(r, 37),
            _randn(r, 37),
            _randn(r, 37),
            _randn(r, 5, 37),
            _randn(r, 5),
        ),
    ),  # fmt: skip
    Case("rows", _rows, lambda r: (_randn(r, 29, 67),)),
    Case(
        "gemm",
        _gemm,
        lambda r: (
            _randn(r, 65, 129),
            _randn(r, 129, 67),
            _randn(r, 3, 33, 70),
            _randn(r, 3, 70, 17),
        ),
    ),
    Case(
        "cnn",
        _cnn,
        lambda r: (_randn(r, 2, 3, 17, 19),),
        lambda r: (
            _randn(r, 8, 3, 3, 3),
            _randn(r, 8),
            _randn(r, 8),
            r.uniform(0.5, 2, 8).astype(np.float32),
            _randn(r, 8),
            _randn(r, 8),
            _randn(r, 5, 8, 3, 3),
        ),
    ),  # fmt: skip
    Case(
        "attention",
        _attention,
        lambda r: (
            _randn(r, 2, 3, 19, 16),
            _randn(r, 2, 3, 19, 16),
            _randn(r, 2, 3, 19, 16),
            _randn(r, 1, 2, 70, 32),
            _randn(r, 1, 2, 130, 32),
            _randn(r, 1, 2, 130, 32),
            _randn(r, 70, 130) + 1.5,
        ),
    ),  # fmt: skip
    Case("scans", _scans, lambda r: (_randn(r, 5, 41),)),
    Case("select", _select, lambda r: (_randn(r, 17, 23), _randn(r, 17, 23))),
    Case(
        "embed",
        _embed,
        lambda r: (r.integers(0, 50, (2, 11)).astype(np.int64),),
        lambda r: (_randn(r, 50, 24), _randn(r, 24, 9)),
    ),
    Case("bf16", _bf16, lambda r: (_randn(r, 9, 15), _randn(r, 15, 6))),
    # float16 storage: a bundle that needs shader-f16 (exported only where pyrite's device has
    # it; a browser adapter without it must refuse by name)
    Case("f16", _f16, lambda r: (_randn(r, 6, 11),), lambda r: (_randn(r, 11, 4),)),
]
HAS_F16 = "shader-f16" in pr.device_info()["features"]


def _torch(case, inputs, weights, dtype):
    conv = [torch.tensor(a) for a in (*inputs, *weights)]
    conv = [t.to(dtype) if t.is_floating_point() else t for t in conv]
    with torch.no_grad():
        out = case.fn(torch, TF, *conv)
    return [o.numpy() for o in (out if isinstance(out, tuple) else (out,))]


def _check(case, got, inputs, weights):
    """The outputs `got` (numpy) of `case` on `inputs` against PyTorch (the module docstring)."""
    t32 = _torch(case, inputs, weights, torch.float32)
    t64 = _torch(case, inputs, weights, torch.float64)
    assert len(got) == len(t64), (case.name, len(got), len(t64))
    for i, (g, a, b) in enumerate(zip(got, t32, t64)):
        g = np.asarray(g).reshape(b.shape)
        if b.dtype.kind in "biu":
            np.testing.assert_array_equal(g, b, err_msg=f"{case.name} output {i}")
            continue
        a, b, g = (np.asarray(v, np.float64) for v in (a, b, g))
        if case.name == "bf16":
            # the exact product of the bf16-rounded inputs, rounded once to bf16 (half an ulp,
            # 2^-8 relative) after a float32 sum
            x, w = (torch.tensor(v).bfloat16().double().numpy() for v in inputs)
            exact = x @ w
            bound = 2**-8 * np.abs(exact) + 64 * 2**-24 * (np.abs(x) @ np.abs(w))
            assert (np.abs(g - exact) <= bound).all(), (case.name, i)
            continue
        bound = 4 * np.abs(a - b).max() + 64 * 2**-24 * np.abs(b).max()
        err = np.abs(g - b).max()
        assert err <= bound, (case.name, i, err, bound)


def _pyrite_fn(case, weights):
    ws = [pr.tensor(w) for w in weights]
    return lambda *xs: case.fn(pr, F, *xs, *ws)


@pytest.fixture(scope="module")
def bundles(tmp_path_factory):
    """Every case exported from inputs A; the bundles' examples then replaced by inputs B.
    {name: (folder, inputs A, inputs B, weights)}."""
    root = tmp_path_factory.mktemp("bundles")
    rng = np.random.default_rng(47)
    out = {}
    for case in CASES:
        if case.name == "f16" and not HAS_F16:
            continue
        weights = case.weights(rng)
        a, b = case.inputs(rng), case.inputs(rng)
        folder = root / case.name
        web.export(_pyrite_fn(case, weights), tuple(pr.tensor(x) for x in a), folder)
        out[case.name] = (folder, a, b, weights)
    return out


def _results(outs):
    return [o.float().numpy() if o.dtype.is_floating_point else o.numpy() for o in outs]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_bundle_replayed_from_its_files_matches_torch(bundles, case):
    if case.name not in bundles:
        pytest.skip("this device has no shader-f16")
    folder, a, b, weights = bundles[case.name]
    bundle = web.load(folder)
    for inputs in (a, b):  # the traced inputs, then others: nothing of the example is baked in
        outs = bundle(*(pr.tensor(x) for x in inputs))
        _check(case, _results(outs if isinstance(outs, tuple) else (outs,)), inputs, weights)


def test_bundle_files_hold_the_plan_and_the_example(bundles):
    folder, a, _, _ = bundles["mlp"]
    assert sorted(os.listdir(folder)) == [
        "example.bin", "example.json", "index.html", "model.bin", "model.json", "pyrite.js",
    ]  # fmt: skip
    plan = json.loads((folder / "model.json").read_text())
    assert plan["format"] == "pyrite-web" and plan["version"] == 1
    (spec,) = plan["inputs"]
    assert (spec["name"], spec["shape"], spec["dtype"]) == ("input_0", [7, 13], "float32")
    kinds = {c[0] for c in plan["commands"]}
    assert kinds <= {"d", "c", "u"} and "d" in kinds
    # the weights are in model.bin: 37*13 + 37*3 + 5*37 + 5 float32 values at least
    assert (folder / "model.bin").stat().st_size >= 4 * (37 * 13 + 37 * 3 + 5 * 37 + 5)
    assert plan["needs"]["features"] == []  # (portable: no subgroups, float32)
    if "f16" in bundles:
        f16 = json.loads((bundles["f16"][0] / "model.json").read_text())
        assert f16["needs"]["features"] == ["shader-f16"]


def chromium() -> str:
    """The Chromium the browser halves run in: without one the test skips (after its Python
    half), except under CI, where it fails (scripts/setup.sh --test installs Chromium there).
    tests/test_web_generate47.py and tests/test_fuzz_web47.py ask here too."""
    exe = find_chromium()
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail("CI has no Chromium: scripts/setup.sh --test installs it")
        pytest.skip("no Chromium on this machine (scripts/setup.sh --test installs it)")
    return exe


def _browser_reports(bundles, with_b):
    """Run every bundle's example in Chromium (with inputs B as the example when `with_b`)."""
    exe = chromium()
    if with_b:
        for folder, _, b, _ in bundles.values():
            web.write_example(folder, *(pr.tensor(x) for x in b))
    reports = run_in_browser([v[0] for v in bundles.values()], timeout=240, full=True, chromium=exe)
    return {os.path.basename(r["bundle"].rstrip("/")): r for r in reports}


@pytest.fixture(scope="module")
def browser(bundles):
    return _browser_reports(bundles, with_b=True)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_bundle_in_chromium_matches_torch(bundles, browser, case):
    if case.name not in bundles:
        pytest.skip("this device has no shader-f16")
    folder, _, b, weights = bundles[case.name]
    r = browser[case.name]
    plan = json.loads((folder / "model.json").read_text())
    if "shader-f16" in plan["needs"]["features"] and "error" in r:
        assert "need the WebGPU feature 'shader-f16'" in r["error"], r["error"]
        return  # (the browser's adapter has no shader-f16, and the page says so)
    assert "error" not in r, r.get("error")
    got = []
    for spec in plan["outputs"]:
        o = r["outputs"][spec["name"]]
        assert o["shape"] == spec["shape"] and o["dtype"] == spec["dtype"]
        got.append(np.array([float(v) for v in o["data"]], np.float64))  # ("nan", "inf")
    _check(case, got, b, weights)
    assert r["kernels"] == sum(c[0] == "d" for c in plan["commands"])
    assert r["concurrent_same"]
    assert r["run_ms"] > 0


def test_page_names_a_truncated_bundle(bundles, browser, tmp_path):
    folder = tmp_path / "cut"
    shutil.copytree(bundles["mlp"][0], folder)
    binary = folder / "model.bin"
    binary.write_bytes(binary.read_bytes()[:-8])
    (r,) = run_in_browser([folder], timeout=120)
    assert "model.bin has" in r["error"] and "truncated" in r["error"], r


def test_cli_checks_a_bundle_in_chromium(bundles, browser, capsys):
    from pyrite.cli import main

    folder = bundles["mlp"][0]
    assert main(["web", str(folder), "--check"]) == 0
    out = capsys.readouterr().out
    assert "[ok ] output [7, 5] float32" in out and "kernels on" in out
    assert main(["web", str(folder.parent), "--check"]) == 2  # (no model.json there)


# ---- language models: transformers' as the reference (tests/test_models_*46's helpers) -------
transformers = pytest.importorskip("transformers")


def test_gpt2_and_llama_bundles_match_transformers(tmp_path, rng):
    from tests.test_models_gpt2_bert46 import _gpt2, _pyrite_gpt2
    from tests.test_models_llama46 import _check_logits, _hf, _pyrite

    hg = _gpt2(seed=3, n_layer=2, n_embd=24, n_head=3, vocab_size=53)
    hl = _hf("llama", seed=4)
    folders, ids_b = [], {}
    for name, hf, pm, vocab in (
        ("gpt2", hg, _pyrite_gpt2(hg), hg.config.vocab_size),
        ("llama", hl, _pyrite(hl), hl.config.vocab_size),
    ):
        pm.eval()
        a = rng.integers(0, vocab, (2, 9))
        b = rng.integers(0, vocab, (2, 9))
        folder = tmp_path / name
        web.export(pm, pr.tensor(a), folder)
        bundle = web.load(folder)
        for ids in (a, b):
            _check_logits(bundle(pr.tensor(ids)).numpy(), hf, ids)
        web.write_example(folder, pr.tensor(b))
        folders.append(folder)
        ids_b[name] = (hf, b)
    for r in run_in_browser(folders, timeout=240, full=True, chromium=chromium()):
        name = os.path.basename(r["bundle"].rstrip("/"))
        assert "error" not in r, r.get("error")
        hf, b = ids_b[name]
        logits = np.asarray(r["outputs"]["output"]["data"], np.float64)
        _check_logits(logits.reshape(r["outputs"]["output"]["shape"]), hf, b)


def test_bert_classifier_bundle_matches_transformers(tmp_path, rng):
    """BERT with a padding mask and token types (three integer inputs), exported, replayed on
    inputs other than the traced ones, in Python and in Chromium."""
    from pyrite.models import BertForSequenceClassification
    from tests.test_models_gpt2_bert46 import _bert, _both, _inputs, _within

    hf = _bert("BertForSequenceClassification", int(rng.integers(1 << 20)))
    hf.save_pretrained(tmp_path / "hf", safe_serialization=True)
    pm = BertForSequenceClassification.from_pretrained(tmp_path / "hf").eval()
    a, b = _inputs(rng), _inputs(rng)
    names = ["input_ids", "token_type_ids", "attention_mask"]
    folder = tmp_path / "bert"
    web.export(lambda i, t, m: pm(i, attention_mask=m, token_type_ids=t),
               tuple(pr.tensor(x) for x in a), folder, input_names=names)  # fmt: skip

    def ref(ids, types, mask):
        def fwd(m):
            kw = {"attention_mask": torch.tensor(mask), "token_type_ids": torch.tensor(types)}
            return m(torch.tensor(ids), **kw).logits.numpy().astype(np.float64)

        return _both(hf, fwd)

    bundle = web.load(folder)
    for x in (a, b):
        _within(bundle(*(pr.tensor(v) for v in x)).numpy(), *ref(*x))
    exe = chromium()
    web.write_example(folder, *(pr.tensor(v) for v in b))
    (r,) = run_in_browser([folder], timeout=240, full=True, chromium=exe)
    assert "error" not in r, r.get("error")
    o = r["outputs"]["output"]
    _within(np.asarray(o["data"], np.float64).reshape(o["shape"]), *ref(*b))


# ---- refusals -------------------------------------------------------------------------------
def test_export_refuses_what_a_replay_cannot_repeat(tmp_path):
    drop = pr.nn.Sequential(pr.nn.Linear(4, 4), pr.nn.Dropout(0.5))
    x = pr.randn(3, 4)
    with pytest.raises(web.ExportError, match=r"eval"):
        web.export(drop, x, tmp_path / "a")
    assert not (tmp_path / "a").exists()  # (nothing written for a refused export)
    web.export(drop.eval(), x, tmp_path / "a")  # in eval mode dropout is the identity
    with pytest.raises(web.ExportError, match=r"reads a value back"):
        web.export(lambda t: t * t.sum().item(), x, tmp_path / "b")
    with pytest.raises(web.ExportError, match=r"argument 1 is float"):
        web.export(lambda t, s: t * s, (x, 2.0), tmp_path / "c")
    with pytest.raises(web.ExportError, match=r"2 input_names for 1 inputs"):
        web.export(lambda t: t + 1, x, tmp_path / "d", input_names=["a", "b"])
    with pytest.raises(web.ExportError, match=r"1 output_names for 2 outputs"):
        web.export(lambda t: (t + 1, t * 2), x, tmp_path / "d", output_names=["a"])
    with pytest.raises(web.ExportError, match=r"two inputs have one name"):
        web.export(lambda t, u: t + u, (x, x), tmp_path / "d", input_names=["a", "a"])
    (tmp_path / "file").write_text("x")
    with pytest.raises(web.ExportError, match=r"not a folder"):
        web.export(lambda t: t + 1, x, tmp_path / "file")
    with pytest.raises(web.ExportError, match=r"not empty"):
        web.export(lambda t: t + 1, x, tmp_path / "a", overwrite=False)


def test_python_data_made_inside_is_a_constant_of_the_bundle(tmp_path, rng):
    x = pr.tensor(_randn(rng, 3, 4))
    web.export(lambda t: t * pr.tensor([1.0, -2.0, 3.0, 0.5]) + pr.arange(4), x, tmp_path / "k")
    y = _randn(rng, 3, 4)
    prod = y.astype(np.float64) * [1.0, -2.0, 3.0, 0.5]
    want = prod + np.arange(4)
    got = web.load(tmp_path / "k")(y).numpy()
    # (two float32 roundings: the product's and the sum's, half an ulp each)
    assert (np.abs(got - want) <= 2**-24 * (np.abs(prod) + np.abs(want))).all()


def test_load_checks_its_inputs_and_its_folder(tmp_path):
    x = pr.randn(3, 5)
    web.export(lambda t, u: {"sum": t + u, "prod": t * u}, (x, x + 1), tmp_path / "b",
               input_names=["t", "u"])  # fmt: skip
    b = web.load(tmp_path / "b")
    assert [s["name"] for s in b.inputs] == ["t", "u"]
    assert [s["name"] for s in b.outputs] == ["sum", "prod"]
    s, p = b(np.ones((3, 5), np.float32), x)
    np.testing.assert_allclose(s.numpy(), x.numpy() + 1, rtol=0, atol=0)
    np.testing.assert_allclose(p.numpy(), x.numpy(), rtol=0, atol=0)
    with pytest.raises(ValueError, match=r"input t has shape \(3, 5\).*got \(5, 3\)"):
        b(pr.randn(5, 3), x)
    with pytest.raises(TypeError, match=r"takes 2 inputs \(t, u\), got 1"):
        b(x)
    (tmp_path / "c").mkdir()
    with pytest.raises(web.ExportError, match=r"holds no model.json"):
        web.load(tmp_path / "c")
    (tmp_path / "c" / "model.json").write_text(json.dumps({"format": "onnx"}))
    with pytest.raises(web.ExportError, match=r"not a pyrite web bundle"):
        web.load(tmp_path / "c")
    (tmp_path / "c" / "model.json").write_text('{"format": "pyrite-web", "vers')
    with pytest.raises(web.ExportError, match=r"model.json is damaged"):
        web.load(tmp_path / "c")
    w = pr.randn(5)
    web.export(lambda t: t * w, x, tmp_path / "w")  # (w's values: model.bin)
    binary = tmp_path / "w" / "model.bin"
    binary.write_bytes(binary.read_bytes()[:-4])
    with pytest.raises(web.ExportError, match=r"truncated"):
        web.load(tmp_path / "w")


# ---- pyrite.js's element conversions, in Node.js ----------------------------------------------
def _js(x) -> str:
    """A non-finite float as JavaScript's Number() reads it."""
    return "NaN" if np.isnan(x) else ("Infinity" if x > 0 else "-Infinity")


def test_js_half_conversions_match_numpy(tmp_path, rng):
    node = shutil.which("node")
    if node is None:
        if os.environ.get("CI"):
            pytest.fail("CI has no Node.js")
        pytest.skip("no Node.js")
    vals = np.concatenate(
        [
            rng.standard_normal(300) * 10.0 ** rng.integers(-9, 6, 300),
            [0.0, -0.0, 65504, 65519.99, 65520, 1e9, -1e9, 2**-24, 2**-25, 3 * 2**-26, 2**-14,
             np.inf, -np.inf, np.nan, 1 + 2**-11, 1 + 3 * 2**-11, 2.0**-24 * 1.5],
        ]
    ).astype(np.float32)  # fmt: skip
    js = tmp_path / "t.mjs"
    src = os.path.join(os.path.dirname(web.__file__), "pyrite.js")
    js.write_text(
        f"import {{ toHalf, fromHalf }} from {json.dumps('file://' + src)};\n"
        f"const v = {json.dumps([float(x) if np.isfinite(x) else _js(x) for x in vals])}"
        ".map(Number);\n"
        "const h = v.map(toHalf);\n"
        "console.log(JSON.stringify({h, back: h.map((x) => String(fromHalf(x)))}));\n"
    )
    out = json.loads(
        subprocess.run([node, str(js)], capture_output=True, text=True, check=True).stdout
    )
    with np.errstate(over="ignore"):  # (the values past float16's range: inf, as wanted)
        want = vals.astype(np.float16)
    bits = np.array(out["h"], np.uint16)
    same = (bits == want.view(np.uint16)) | (np.isnan(want) & np.isnan(bits.view(np.float16)))
    assert same.all(), vals[~same]
    back = np.array([float(s) for s in out["back"]], np.float32)
    np.testing.assert_array_equal(back, want.astype(np.float32))
