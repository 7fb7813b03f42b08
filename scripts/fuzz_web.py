"""Randomized differential fuzz of `pyrite.web` (session 47): a function's `pr.compile` recording
exported as a browser bundle (`web.export`), replayed from the bundle's files alone — by
`web.load` on pyrite's device, and with `--browser` by `pyrite.js` in headless Chromium (WebGPU
through SwiftShader) — against eager pyrite (float32) running the same function on the same
inputs.

The programs are scripts/fuzz_compile.py's (imported, not copied): its `Plan` draws a model (an
MLP on (B, D); tokens (B, L) through an Embedding, attention blocks and MLPs; Conv1d on (B, C, L);
Conv2d on (B, C, H, W); blocks of Linear / Conv / LayerNorm / BatchNorm / Dropout / activations /
residual adds / in-place ops / where / cat / stack / reductions / reshape, transpose and strided
views) and its `Net` builds it; its `Side` gives the loss and the no_grad predict (softmax,
argmax). What this fuzzer adds is what an export needs, drawn from a stream of its own:
- the function exported, taking tensors only (its Python values baked in by closure): the
  forward `model(x)`; the predict pair (softmax, argmax: an int64 output); or the loss
  `loss(model(x) · s + (1 - s) [ :k], y[:k])` (plan.scalar, plan.rows) with a target `y` as a
  second input (int64 class ids, -100 ignored, or floats), returned as fuzz_compile's step
  returns it (`ret`: the loss; (loss, out); {"loss", "out": out.sum(-1)}; [loss, a parameter]);
- the bundle's awkward outputs: an input returned as it is, a transposed or strided view of an
  output, the same tensor twice, a constant made inside the function (pr.linspace), Python data
  made inside (a pr.tensor: a constant of the bundle), a bool mask, a target written in place
  before it is read (plan.write_y);
- the model named by the function, or reached only through another object (fuzz_compile's
  predict function, an attribute of a plain object) on a quarter of the seeds;
- wider shapes than the training fuzz: the width D in 4 .. 66 (GEMM and row kernels over more
  than one workgroup), batch 1 .. 7, sequence / spatial sizes 1 .. 9; a float16 input (the model
  casts it) on a sixth of the non-token seeds;
- train() on a third of the seeds whose model has no Dropout p > 0 (BatchNorm then normalises by
  the batch's statistics and updates its running ones inside the recording), eval() otherwise.
  Everything runs under no_grad, as `web.export` traces.

For each seed: the eager function on inputs A (a fresh copy of the model; where it raises, the
seed is skipped), then `web.export` with inputs A; then the eager function on the exported model
(its state as the bundle starts from: a train-mode BatchNorm's running statistics, an
Embedding's max_norm renormalisation) on inputs A and fresh inputs B, left pending as a caller's
own work would be, and the bundle `web.load`ed and run on A and B; and example.json / .bin (the
page's self-check) must hold inputs A and eager's outputs on them. With `--browser` every seed's
bundle is exported first and its example replaced by inputs B (`web.write_example`), then ONE
`run_in_browser` runs them all and each report is judged against eager on B (a bundle the page
could not build or run — e.g. WGSL that Chromium's Tint refuses — is a failure, its message
quoted).

Judged as scripts/fuzz_compile.py judges compiled against eager, with its rule and tolerance
(`fuzz_compile.compare`, fusion on — pr.compile's default, which `web.export` traces with):
    |bundle - eager| <= 2^-18 · (|eager| + max|eager|)   (elementwise, per output)
over eager's finite values (its NaN and infinities must be matched exactly: they would void the
scale); shapes and dtypes must match exactly. A bundle replays the very kernels of the recording
(portable ones: no subgroup operations, a different summation order than eager's subgroup
reductions where the device has them), so it differs from eager only as a compiled replay does:
a fused map rounding once where eager rounded twice. Integer and bool outputs are exact under
that rule (an index off by one exceeds it). Measured when this was written: the largest
|bundle - eager| was 0.057 of that tolerance over seeds 0:300 in Python, 0.052 over 0:150 in
Chromium; SwiftShader's results were bit-identical to lavapipe's replay for 92 of 124 bundles,
the rest within 2e-7 of the output's scale (its exp / tanh / erf need no wider tolerance).

Classified, not failures:
- skip: eager raised on inputs A (e.g. BatchNorm in train mode on one sample per channel);
- skip: `web.export` refused the function with an ExportError it documents, tallied by its
  reason (REFUSALS). Seen: cross_entropy whose example targets hold ignore_index (-100) reads a
  value back — its label range check (nn/_loss.py _check_labels) knows no range for the targets
  with -100 replaced by 0, so it checks on the device; targets all in [0, C) need no check, and
  such a bundle takes -100 later; BatchNorm(momentum=None) in train mode reads its batch count
  back (its cumulative average's factor). Any other ExportError is a failure;
- skip (browser): pyrite.js refused a bundle needing a WebGPU feature the adapter lacks
  (SwiftShader has no shader-f16: the float16 input's cast needs it).

Found by it and fixed (tests/test_fuzz_web47.py has each one's minimal case):
- web.export of a function reaching its model only through another object traced once, met the
  model as new, ran eagerly and recorded nothing ("could not be recorded whole", no reason);
  export now calls again while the trace meets new modules (pyrite/web/_export.py).
- web.load allocated a bundle's buffers as kernel outputs and wrote their first contents through
  the queue, which runs before the device's pending batch: a buffer freed while that batch was
  open went to the bundle, so eager work still pending at the load read the bundle's weights as
  its input, or wrote over them (pyrite/web/_run.py Bundle.__init__: now upload=True). Hence
  eager's outputs here are left pending while the bundle loads, as a caller's own would be.
- web.export wrote example.json's inputs from its own copies after the function had written them
  in place (twice where the first trace met new modules), while the example's outputs came from
  the inputs as given: the page's self-check ran other inputs than its outputs came from
  (pyrite/web/_export.py: each call now gets fresh copies).

    .venv/bin/python scripts/fuzz_web.py --seeds 0:400 [--show 17] [--verbose]
    .venv/bin/python scripts/fuzz_web.py --browser --seeds 0:50 [--timeout 600]
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tempfile
import traceback
import warnings
from types import SimpleNamespace

import numpy as np

import pyrite as pr

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import fuzz_compile  # noqa: E402
import fuzz_driver  # noqa: E402
from fuzz_driver import parse_seeds  # noqa: E402,F401  (the tests' seed lists)

from pyrite import web  # noqa: E402

WIDTHS = (4, 6, 8, 12, 18, 34, 66)  # (even: the "view" block splits D in two halves)
RULE = SimpleNamespace(fusion=True)  # fuzz_compile.compare's tolerance with fusion on


# ---- the case: fuzz_compile's plan, and the export's own draws --------------------------------
class Case:
    def __init__(self, seed):
        self.seed = seed
        p = self.plan = fuzz_compile.Plan(seed)
        w = fuzz_driver.Draws([47, seed])  # (a stream of its own: the plan's draws unchanged)
        p.d = w.pick(WIDTHS)
        self.batch = 1 + w.r(7)
        self.length = 1 + w.r(9)  # seq: tokens; conv1d: L; conv2d: H
        self.width2 = 1 + w.r(9)  # conv2d: W
        self.half = p.family != "seq" and w.chance(1 / 6)
        self.train = not p.eval_only and w.chance(1 / 3)
        self.fn = w.pick(("forward", "forward", "predict", "loss", "loss"))
        self.s = w.pick((0.5, 1.25)) if p.scalar else None
        self.k = 1 + w.r(4) if p.rows else None
        self.ret = p.ret if p.ret in ("tuple", "dict", "param") else "loss"
        extras = ("input", "view", "twice", "const", "hostdata", "mask")
        self.extras = [e for e in extras if w.chance(0.15)]
        # the model named by the function itself, or reached only through another object (the
        # predict function of fuzz_compile, an attribute)
        self.indirect = w.chance(0.25)
        self.write_y = p.write_y and p.loss in ("mse", "l1")

    def text(self):
        out = [self.plan.text()]
        out.append(
            f"  web: d={self.plan.d} batch {self.batch} length {self.length} width2 "
            f"{self.width2} half {self.half} train {self.train}; fn {self.fn} s {self.s} "
            f"k {self.k} ret {self.ret} write_y {self.write_y} extras {self.extras} indirect "
            f"{self.indirect}"
        )
        return "\n".join(out)


def build(seed):
    return Case(seed)


def describe(case):
    return case.text()


# ---- inputs and the function -----------------------------------------------------------------
def make_inputs(case: Case, rng) -> tuple:
    """The function's inputs (fresh tensors): x, and y where the function is the loss."""
    p, b = case.plan, case.batch
    if p.family == "seq":
        x = pr.tensor(rng.integers(0, 11, (b, case.length)), dtype=pr.int64)
        n = b * case.length
    else:
        shape = {"mlp": (b, 5), "conv1d": (b, 3, case.length)}.get(
            p.family, (b, 2, case.length, case.width2)
        )
        x = pr.tensor(rng.standard_normal(shape).astype(np.float32))
        x = x.half() if case.half else x
        n = b
    if case.fn != "loss":
        return (x,)
    return x, fuzz_compile.make_targets(p, rng, n)


def make_model(case: Case):
    """(model, side): fuzz_compile's Side gives the model (its weights fixed by the seed), its
    loss and its predict."""
    side = fuzz_compile.Side(case.plan, compiled=False)
    side.model.train(case.train)
    return side.model, side


def make_fn(case: Case, side):
    """The function exported: tensors in, a tensor or a structure of tensors out."""
    model = side.model
    # (indirect: fuzz_compile's predict names the model, the function names predict; a lambda
    # reads side.model, an attribute of an object that is no module)
    predict = side._make_predict()
    call = (lambda x: side.model(x)) if case.indirect else model
    weight = lambda: side.model.head.weight  # noqa: E731  (the functions below name no model)
    s, k, ret, extras = case.s, case.k, case.ret, case.extras

    def more(outs, x, out):
        outs = list(outs)
        if "input" in extras:
            outs.append(x)
        if "view" in extras:
            outs.append(out.t() if out.ndim == 2 else out[::2])
        if "twice" in extras:
            outs += [outs[0], outs[0]]
        if "const" in extras:
            outs.append(pr.linspace(-1.0, 1.0, 5))
        if "hostdata" in extras:  # (a tensor of Python data made inside: a bundle's constant)
            outs.append(out * pr.tensor(np.linspace(0.5, 1.5, out.shape[-1], dtype=np.float32)))
        if "mask" in extras:
            outs.append(out > 0)
        return outs

    if case.fn == "forward":

        def fn(x):
            out = call(x)
            outs = more([out], x, out)
            return outs[0] if len(outs) == 1 else tuple(outs)

    elif case.fn == "predict":

        def fn(x):
            if case.indirect:
                prob, idx = predict(x)
            else:  # (fuzz_compile's predict, written out)
                out = call(x)
                prob, idx = out.softmax(-1), out.argmax(-1)
            return tuple(more([prob, idx], x, prob))

    else:

        def fn(x, y):
            out = call(x)
            if s is not None:
                out = out * s + (1.0 - s)
            if k is not None:
                out, y = out[:k], y[:k]
            if case.write_y:  # (an argument written in place, then read)
                y.mul_(0.5).add_(0.25)
            loss = side._loss(out, y)
            if ret == "tuple":
                res = [loss, out]
            elif ret == "dict":
                res = {"loss": loss, "out": out.sum(-1)}
            elif ret == "param":
                res = [loss, weight()]
            else:
                res = [loss]
            if isinstance(res, dict):
                for j, e in enumerate(more([loss], x, out)[1:]):
                    res[f"extra{j}"] = e
                return res
            res = more(res, x, out)
            return res[0] if len(res) == 1 else (res if ret == "param" else tuple(res))

    return fn


def _eager(fn, inputs):
    """fn on copies of the inputs (it may write them), its output leaves as [(name, tensor)]
    — not read back here: their kernels may still be pending when the caller goes on."""
    with pr.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = fn(*(t.clone() for t in inputs))
    return [(k, v) for k, v in fuzz_compile._flat(out) if isinstance(v, pr.Tensor)]


def _np(t):
    return t.detach().float().numpy().astype(np.float64)


def _msg(e):
    return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]


# ---- judging ----------------------------------------------------------------------------------
def judge(label, want, got) -> str | None:
    """want: eager [(name, tensor)]; got: [(shape, dtype name, values)] in the bundle's output
    order. The first disagreement, as text, or None."""
    if len(want) != len(got):
        return f"{label}: {len(got)} outputs, eager has {len(want)}"
    a, b = {}, {}
    for j, ((name, t), (shape, dtype, arr)) in enumerate(zip(want, got)):
        key = f"{label} output {j} ({name})"
        if tuple(shape) != tuple(t.shape) or dtype != t.dtype.name:
            return f"{key}: {dtype}{list(shape)}, eager {t.dtype.name}{list(t.shape)}"
        x, y = _np(t), np.asarray(arr, np.float64).reshape(tuple(t.shape))
        # (compare's scale is max|eager|: a NaN or an infinity there would void it; eager's
        # non-finite values are matched exactly, the finite ones judged by the rule)
        odd = ~np.isfinite(x)
        same = (x == y) | (np.isnan(x) & np.isnan(y))
        if (odd & ~same).any():
            i = int(np.argmax((odd & ~same).ravel()))
            return f"{key}: eager {x.ravel()[i]!r} at element {i}, bundle {y.ravel()[i]!r}"
        a[key], b[key] = np.where(odd, 0.0, x), np.where(odd, 0.0, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (compare's nanmax of an all-NaN difference)
        bad = fuzz_compile.compare(RULE, a, b, 0)
    return None if bad is None else bad.removeprefix("call 0: ").replace("compiled", "bundle")


def _bundle_outputs(outs):
    outs = outs if isinstance(outs, tuple) else (outs,)
    return [(tuple(o.shape), o.dtype.name, _np(o)) for o in outs]


def _example_check(folder, bundle, inputs, want):
    """The example web.export wrote (example.json / .bin, the page's self-check): its inputs are
    the inputs it was given and its outputs eager's on them (by the rule). None, or a verdict."""
    with open(os.path.join(folder, "example.json")) as fh:
        meta = json.load(fh)
    raw = np.fromfile(os.path.join(folder, "example.bin"), np.uint8)

    def values(e):
        return raw[e["at"] : e["at"] + e["bytes"]].view(np.dtype(e["type"])).astype(np.float64)

    for spec, e, t in zip(bundle.inputs, meta["inputs"], inputs):
        if not np.array_equal(values(e), _np(t).ravel(), equal_nan=True):
            return (
                "fail",
                f"example.json: input {spec['name']} is not the input the export was given",
            )
    got = [(s["shape"], s["dtype"], values(e)) for s, e in zip(bundle.outputs, meta["outputs"])]
    bad = judge("example.json A", want, got)
    return None if bad is None else ("fail", bad)


# the refusals web.export documents (its docstring, tests/test_web47.py): a value read back to
# the host inside, values refreshed at every call (a random op), what a bundle cannot carry (a
# complex dtype, no tensor returned). (Python data made inside is a constant of the bundle.)
REFUSALS = (
    r"reads (a value|values) back to the host",
    r"refreshes at every call",
    r"bundles carry real dtypes only",
    r"returns no tensor",
)
# what the browser may lack: pyrite.js's refusal of a bundle that needs a feature the adapter
# does not offer (SwiftShader has no shader-f16: a float16 input's cast needs it)
BROWSER_LACKS = r"need the WebGPU feature '([\w-]+)', which this adapter does not offer"


def _export(case, side, inputs, folder):
    """(verdict, fn): verdict None where web.export wrote the bundle of fn."""
    fn = make_fn(case, side)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            web.export(fn, inputs, folder)
    except web.ExportError as e:
        msg = str(e).splitlines()[0].removeprefix("pyrite: web.export: ")
        if any(re.search(r, msg) for r in REFUSALS):
            return ("skip", f"export refused: {msg[:200]}"), fn
        return ("fail", f"export raised ExportError: {msg}"), fn
    except Exception as e:  # noqa: BLE001
        tb = traceback.format_exc().splitlines()[-6:]
        return ("fail", f"export raised where eager did not: {_msg(e)}\n" + "\n".join(tb)), fn
    return None, fn


def _probe(case, inputs):
    """A verdict where eager raises on these inputs (a fresh model: nothing of it is reused)."""
    _, side = make_model(case)
    try:
        _eager(make_fn(case, side), inputs)
    except Exception as e:  # noqa: BLE001
        return "skip", f"eager raised {_msg(e)}"
    return None


def _inputs(case):
    rng = np.random.default_rng(case.seed + 7)
    return make_inputs(case, rng), make_inputs(case, rng)


def _replay(folder, fn, a, b):
    """Eager on inputs A and B (on the exported model: its state as the bundle starts from),
    left pending as a caller's own work would be, then the bundle loaded and run on them:
    (verdict or None, bundle)."""
    want = {"A": _eager(fn, a), "B": _eager(fn, b)}
    try:
        bundle = web.load(folder)
        got = {"A": _bundle_outputs(bundle(*a)), "B": _bundle_outputs(bundle(*b))}
    except Exception as e:  # noqa: BLE001
        tb = traceback.format_exc().splitlines()[-6:]
        return ("fail", f"the bundle's replay raised: {_msg(e)}\n" + "\n".join(tb)), None
    for label in ("A", "B"):
        bad = judge(label, want[label], got[label])
        if bad:
            return ("fail", bad), bundle
    return None, bundle


def check(case: Case):
    """(status, detail): the bundle replayed by web.load on inputs A and B against eager."""
    if BROWSER is not None:
        return BROWSER[case.seed]
    a, b = _inputs(case)
    bad = _probe(case, a)
    if bad:
        return bad
    _, side = make_model(case)
    folder = tempfile.mkdtemp(prefix="fuzz-web-")
    try:
        bad, fn = _export(case, side, a, folder)
        if bad:
            return bad
        verdict, bundle = _replay(folder, fn, a, b)
        if verdict is not None:
            return verdict
        ex = _example_check(folder, bundle, a, _eager(fn, a))
        return ex or ("ok", f"{len(bundle.outputs)} outputs")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# ---- the browser: every seed's bundle in one Chromium launch ------------------------------------
BROWSER = None  # {seed: verdict} once --browser has run the batch (check then reads it)


def _from_report(o):
    """A report's output values as float64 (the page writes NaN and infinities as "nan",
    "inf", "-inf", which float() reads)."""
    return np.asarray([float(v) for v in o["data"]], np.float64)


def check_browser(seeds, timeout=None, chromium=None) -> dict:
    """{seed: (status, detail)}: each seed's bundle, exported with inputs A, its example made
    inputs B, run by pyrite.js in one headless Chromium launch and judged against eager on B."""
    from pyrite.web._browser import run_in_browser

    verdicts, pending = {}, {}
    root = tempfile.mkdtemp(prefix="fuzz-web-browser-")
    try:
        for seed in seeds:
            case = build(seed)
            a, b = _inputs(case)
            bad = _probe(case, a)
            if bad:
                verdicts[seed] = bad
                continue
            _, side = make_model(case)
            folder = os.path.join(root, f"seed{seed}")
            try:
                bad, fn = _export(case, side, a, folder)
                if bad:
                    verdicts[seed] = bad
                    continue
                want = _eager(fn, b)  # (the model as the bundle has it: just after the trace)
                web.write_example(folder, *b)
                with open(os.path.join(folder, "model.json")) as fh:
                    plan = json.load(fh)
                names = [o["name"] for o in plan["outputs"]]
            except Exception as e:  # noqa: BLE001
                verdicts[seed] = "fail", f"harness: {_msg(e)}"
                continue
            pending[f"seed{seed}"] = (seed, want, names, plan["needs"]["features"])
        if pending:
            folders = [os.path.join(root, name) for name in pending]
            t = timeout if timeout is not None else 60 + 3 * len(folders)
            try:
                reports = run_in_browser(folders, timeout=t, full=True, chromium=chromium)
            except Exception as e:  # noqa: BLE001
                for seed, *_ in pending.values():
                    verdicts[seed] = "fail", f"the browser run failed: {_msg(e)}"
                return verdicts
            for r in reports:
                seed, *rest = pending.pop(os.path.basename(r["bundle"].rstrip("/")))
                verdicts[seed] = _judge_report(r, *rest)
            for seed, *_ in pending.values():
                verdicts[seed] = "fail", "no report from the browser for this bundle"
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return verdicts


def _judge_report(r, want, names, needs):
    """A page's report on one bundle against eager's outputs `want` (the plan's output `names`
    and WebGPU `needs`)."""
    if "error" in r:
        lacks = re.search(BROWSER_LACKS, r["error"])
        if lacks and lacks.group(1) in needs:
            return "skip", f"the browser's adapter lacks {lacks.group(1)}"
        return "fail", "in Chromium: " + r["error"][:2500]
    if sorted(r["outputs"]) != sorted(names):
        return "fail", f"the page reported outputs {sorted(r['outputs'])}, the plan has {names}"
    if len(names) != len(want):
        return "fail", f"browser B: {len(names)} outputs, eager has {len(want)}"
    outs = [r["outputs"][n] for n in names]
    got = [(o["shape"], o["dtype"], _from_report(o)) for o in outs]
    bad = judge("browser B", want, got)
    if bad:
        return "fail", bad
    return "ok", f"{len(want)} outputs (browser)"


def _options(ap):
    ap.add_argument("--browser", action="store_true", help="run the bundles in headless Chromium")
    ap.add_argument("--timeout", type=float, help="the browser run's limit, seconds")


def _configure(args):
    global BROWSER
    if args.browser:
        seeds = [args.show] if args.show is not None else parse_seeds(args.seeds)
        BROWSER = check_browser(seeds, timeout=args.timeout)


def main(argv=None):
    return fuzz_driver.run(
        __doc__, build, check, describe, argv, add_options=_options, configure=_configure
    )


if __name__ == "__main__":
    sys.exit(main())
