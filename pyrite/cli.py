"""The `pyrite` command: `pyrite info`, `pyrite demo`, `pyrite train`, `pyrite bench [--json PATH]
[--quick]`, `pyrite tune [--model bert|gpt] [--shapes ...]`.

pyrite itself is imported inside each subcommand, after `--backend`/`--device` have been put in
the environment the backend reads (PYRITE_BACKEND, PYRITE_DEVICE), so `pyrite --help` works
without a GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

# The limits that bound what pyrite can run, in the order a reader wants them.
KEY_LIMITS = (
    ("max-storage-buffer-binding-size", "bytes"),
    ("max-buffer-size", "bytes"),
    ("max-storage-buffers-per-shader-stage", ""),
    ("max-compute-workgroup-storage-size", "bytes"),
    ("max-compute-invocations-per-workgroup", ""),
    ("max-compute-workgroup-size-x", ""),
    ("max-compute-workgroups-per-dimension", ""),
    ("min-storage-buffer-offset-alignment", "bytes"),
)
# Features pyrite uses or may use; the rest are listed only with --all.
KEY_FEATURES = (
    "shader-f16",
    "subgroup",
    "subgroups",
    "timestamp-query",
    "shader-float32-atomic",
    "cooperative-matrix",
)


def _bytes(n: int) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.4g} {unit} ({n})"
    return f"{n} B"


def _limit(limits: dict, name: str):
    """A limit by its WebGPU name, whether the dict spells it with '-' or '_'."""
    for key in (name, name.replace("-", "_")):
        if key in limits:
            return limits[key]
    return None


def format_info(info: dict, show_all: bool = False) -> str:
    """`pyrite.device_info()` as aligned lines."""
    rows = [
        (key, info.get(key, ""))
        for key in ("name", "implementation", "backend", "type", "driver", "vendor")
    ]
    features = sorted(info.get("features", ()))
    shown = features if show_all else [f for f in features if f in KEY_FEATURES]
    rest = len(features) - len(shown)
    rows.append(("features", ", ".join(shown) + (f" (+{rest} more; --all)" if rest else "")))
    limits = info.get("limits", {})
    names = sorted(limits) if show_all else [name for name, _ in KEY_LIMITS]
    units = dict(KEY_LIMITS)
    for name in names:
        value = _limit(limits, name)
        if value is not None:
            is_bytes = units.get(name.replace("_", "-")) == "bytes"
            rows.append((name, _bytes(value) if is_bytes else str(value)))
    width = max(len(key) for key, _ in rows)
    return "\n".join(f"{key:<{width}}  {value}" for key, value in rows)


def cmd_info(args) -> int:
    import pyrite

    info = pyrite.device_info()
    print(json.dumps(info, indent=2, default=str) if args.json else format_info(info, args.all))
    return 0


def cmd_demo(args) -> int:
    from pyrite import demo

    result = demo.main()
    return result if isinstance(result, int) else 0


def cmd_bench(args, argv: list[str]) -> int:
    from pyrite import bench

    result = bench.main(argv)
    return result if isinstance(result, int) else 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pyrite", description="pyrite: deep learning with WGSL kernels on WebGPU."
    )
    parser.add_argument(
        "--backend",
        choices=("dawn", "wgpu"),
        help="WebGPU implementation (sets PYRITE_BACKEND; default: the faster "
        "one that finds an adapter)",
    )
    parser.add_argument(
        "--device", help="adapter: an index, 'cpu', 'gpu' or part of its name (sets PYRITE_DEVICE)"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    info = sub.add_parser("info", help="show the WebGPU adapter, its features and limits")
    info.add_argument("--json", action="store_true", help="print everything as JSON")
    info.add_argument("--all", action="store_true", help="list every feature and limit")

    sub.add_parser("demo", help="run the demo (pyrite.demo)")

    train = sub.add_parser(
        "train", help="train an MLP on scikit-learn's digits (examples/train_digits.py)"
    )
    train.add_argument("--steps", type=int, default=600, help="optimizer steps (default 600)")
    train.add_argument("--batch-size", type=int, default=64, help="batch size (default 64)")
    train.add_argument("--lr", type=float, default=3e-3, help="AdamW learning rate")
    train.add_argument("--out", default="runs/digits", help="folder for checkpoint, plot, JSON")
    train.add_argument("--seed", type=int, default=0)
    train.add_argument(
        "--compile", action="store_true", help="pr.compile the training step (record, replay)"
    )

    gen = sub.add_parser(
        "generate",
        help="continue a prompt with a Llama-family model (a .gguf file or a Hugging Face folder)",
    )
    gen.add_argument("model", help="a llama.cpp .gguf file, or a folder with config.json")
    gen.add_argument("--prompt", default="", help="the text to continue")
    gen.add_argument("--ids", help="token ids instead of a prompt: 1,450,4996")
    gen.add_argument("--max-new-tokens", type=int, default=32)
    gen.add_argument("--sample", action="store_true", help="sample instead of greedy decoding")
    gen.add_argument("--temperature", type=float, default=1.0)
    gen.add_argument("--top-k", type=int)
    gen.add_argument("--top-p", type=float)
    gen.add_argument("--seed", type=int, default=0)
    gen.add_argument(
        "--dequantize", action="store_true", help="GGUF: float weights instead of packed ones"
    )
    gen.add_argument(
        "--compile",
        action="store_true",
        help="record the one-token step once (pr.compile) and replay it",
    )
    gen.add_argument(
        "--web",
        metavar="FOLDER",
        help="instead of generating here, export the model's decoding to FOLDER as a browser "
        "bundle with a page that generates (pyrite web FOLDER serves it)",
    )
    gen.add_argument("--max-length", type=int, help="--web: the KV cache's positions (default 256)")

    web = sub.add_parser(
        "web",
        help="serve a browser bundle (pyrite.web.export), or --check it in headless Chromium",
    )
    web.add_argument("folder", help="a bundle folder (model.json, model.bin, pyrite.js, ...)")
    web.add_argument(
        "--check",
        action="store_true",
        help="run the bundle's example in headless Chromium and compare with pyrite's outputs",
    )
    web.add_argument("--port", type=int, default=8000, help="port to serve on (default 8000)")

    # pyrite.bench parses its own arguments; these are declared here for --help only.
    bench = sub.add_parser("bench", help="run the benchmark suite (pyrite.bench)")
    bench.add_argument("--json", metavar="PATH", help="also write the results as JSON to PATH")
    bench.add_argument("--quick", action="store_true", help="fewer sizes and repeats")
    bench.add_argument(
        "--only",
        metavar="LIST",
        help="comma list of steps: copy,reduce,rowops,matmul,attention,conv,overhead,latency,"
        "baked,train,bert,compile,quant,web",
    )
    # pyrite.bench.tune parses its own arguments too
    tune = sub.add_parser(
        "tune", help="measure GEMM tiles and K splits for shapes, keep the best (pyrite.bench.tune)"
    )
    tune.add_argument("--model", help="bert or gpt: their products' shapes")
    tune.add_argument("--shapes", help="MxNxK[:layout],... (layout k, n, mk, mn)")
    tune.add_argument("--reps", type=int, help="products timed a candidate (default 10)")
    tune.add_argument("--json", metavar="PATH", help="also write every candidate's time here")
    tune.add_argument("--dry-run", action="store_true", help="measure, keep nothing")
    return parser


def cmd_web(args) -> int:
    """Serve a bundle folder on localhost until interrupted (its pages: draw.html,
    generate.html, index.html), or (--check) run its example in
    headless Chromium: each output's largest difference from what pyrite computed, the time of
    a run; exit 1 where the page failed or an output differs by more than 1e-3 of its scale."""
    import time

    from pyrite.web import _browser

    folder = args.folder
    if not os.path.isfile(os.path.join(folder, "model.json")):
        print(
            f"pyrite web: {folder} holds no model.json (make one: pyrite.web.export)",
            file=sys.stderr,
        )
        return 2
    if args.check:
        (r,) = _browser.run_in_browser([folder], timeout=180)
        if "error" in r:
            print(f"pyrite web: the page failed: {r['error']}", file=sys.stderr)
            return 1
        print(f"{folder}: {r['kernels']} kernels on {r['adapter']} (headless Chromium)")
        print(f"  a run with its read-back {r['run_ms']:.2f} ms; queued back to back "
              f"{r['queued_run_ms']:.3f} ms")  # fmt: skip
        ok = True
        for name, o in r["outputs"].items():
            rel = o["max_abs_diff"] / o["max_abs"] if o["max_abs"] else o["max_abs_diff"]
            good = o["nan_mismatch"] == 0 and rel <= 1e-3
            ok &= good
            print(f"  [{'ok ' if good else 'BAD'}] {name} {o['shape']} {o['dtype']}: largest "
                  f"|difference| from pyrite {o['max_abs_diff']:.2e} (largest |value| "
                  f"{o['max_abs']:.2e})")  # fmt: skip
        return 0 if ok else 1
    server, base = _browser.serve(folder, port=args.port)
    pages = ("draw.html", "generate.html", "index.html")
    pages = [p for p in pages if os.path.isfile(os.path.join(folder, p))]
    print(
        f"pyrite web: serving {os.path.abspath(folder)}; open "
        + " or ".join(base + p for p in pages)
    )
    print("(a browser with WebGPU: Chrome or Edge 113+, Safari 26+; Ctrl-C stops)")
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()
    return 0


def cmd_tune(argv: list[str]) -> int:
    from pyrite.bench import tune

    return tune.main(argv)


def cmd_train(args) -> int:
    """Run examples/train_digits.py of this checkout (the script a PyTorch user reads)."""
    import runpy
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "examples" / "train_digits.py"
    if not script.exists():
        print(f"pyrite train: {script} not found (run from a checkout of pyrite)", file=sys.stderr)
        return 1
    try:
        import matplotlib  # noqa: F401
        import sklearn  # noqa: F401
        import tqdm  # noqa: F401
    except ImportError as err:
        print(
            f"pyrite train: {err.name} is missing: pip install -e '.[train]' (scikit-learn ships "
            "the digits data set; tqdm and matplotlib show the progress and the loss curve)",
            file=sys.stderr,
        )
        return 1
    mod = runpy.run_path(str(script))
    argv = ["--steps", str(args.steps), "--batch-size", str(args.batch_size), "--lr", str(args.lr)]
    argv += ["--compile"] if args.compile else []
    return mod["main"]([*argv, "--out", args.out, "--seed", str(args.seed)])


def _load_for_generate(path: str, dequantize: bool):
    """(model, encode, decode) for `pyrite generate`: a GGUF file with its own tokenizer, or
    a Hugging Face folder with its tokenizer.json (or None: ids only)."""
    import json

    from pyrite import io
    from pyrite.models import GGUFTokenizer, GPT2LMHeadModel, LlamaForCausalLM

    if os.path.isdir(path):
        cfg = os.path.join(path, "config.json")
        kind = "llama"
        if os.path.isfile(cfg):
            with open(cfg, encoding="utf-8") as f:
                kind = json.load(f).get("model_type", "llama")
        model = (GPT2LMHeadModel if kind == "gpt2" else LlamaForCausalLM).from_pretrained(path)
        tj = os.path.join(path, "tokenizer.json")
        if not os.path.isfile(tj):
            return model, None, None
        import tokenizers

        tok = tokenizers.Tokenizer.from_file(tj)
        return model, (lambda t: tok.encode(t).ids), (lambda ids: tok.decode(ids))
    g = io.load_gguf(path, dequantize=dequantize)  # (a progress bar from 1 GiB)
    model = LlamaForCausalLM.from_gguf(g)
    tok = GGUFTokenizer.from_gguf(g) if "tokenizer.ggml.tokens" in g.metadata else None
    if tok is None:
        return model, None, None
    return model, tok.encode, tok.decode


class _Printer:
    """`pyrite generate`'s output as it comes: the text of the prompt and every token so far
    (decoded whole, so a tokenizer's joins and leading-space rules apply as they do at the
    end), less what is printed already. Text ending in U+FFFD (a character whose UTF-8 bytes
    are split across tokens) waits for the next token; so does text that no longer starts
    with what was printed (a decoder that rewrote the past), and if it still does not at the
    end, the whole text is printed again on a line of its own. Without a tokenizer: the ids."""

    def __init__(self, decode, prompt):
        self.decode, self.ids, self.shown = decode, list(prompt), ""
        self._show(final=False)

    def step(self, ids):
        """generate's on_token: this step's token of the one sequence."""
        self.ids.append(int(ids[0]))
        self._show(final=False)

    def end(self):
        self._show(final=True)
        print(flush=True)

    def _show(self, final):
        if self.decode is None:
            text = " ".join(map(str, self.ids))
        else:
            text = self.decode(self.ids)
        if not final:
            text = text.rstrip("\ufffd")
        if text.startswith(self.shown):
            print(text[len(self.shown) :], end="", flush=True)
            self.shown = text
        elif final:
            print("\n" + text, end="", flush=True)


def cmd_generate(args) -> int:
    import time

    import pyrite as pr

    if not os.path.exists(args.model):
        print(f"pyrite generate: no file or folder at {args.model!r}", file=sys.stderr)
        return 1
    model, encode, decode = _load_for_generate(args.model, args.dequantize)
    if args.ids:
        ids = [int(t) for t in args.ids.split(",") if t.strip()]
    elif encode is None:
        print("pyrite generate: the model has no tokenizer: pass --ids", file=sys.stderr)
        return 1
    else:
        ids = encode(args.prompt)
    if not ids:
        print("pyrite generate: an empty prompt: pass --prompt or --ids", file=sys.stderr)
        return 1
    if args.web:
        n = args.max_length or max(256, len(ids) + args.max_new_tokens)
        s = model.export_web(args.web, max_length=n, prompt=ids, decode=decode)
        size = sum(os.path.getsize(os.path.join(args.web, f)) for f in os.listdir(args.web))
        print(
            f"pyrite generate: wrote {args.web} ({size / 2**20:.1f} MiB; {s['kernels']} kernels a "
            f"token, a cache of {n} positions); serve it: pyrite web {args.web}"
        )
        return 0
    t0 = time.perf_counter()
    printer = _Printer(decode, ids)
    out = model.generate(
        pr.tensor([ids]),
        args.max_new_tokens,
        do_sample=args.sample,
        temperature=args.temperature,
        top_k=args.top_k,
        top_p=args.top_p,
        generator=pr.Generator().manual_seed(args.seed),
        on_token=printer.step,
        progress=not sys.stdout.isatty(),  # (on a terminal the text itself shows progress)
        compile=args.compile,
    )[0].tolist()
    dt = time.perf_counter() - t0
    new = out[len(ids) :]
    printer.end()
    print(
        f"[{len(new)} tokens in {dt:.2f} s: {len(new) / max(dt, 1e-9):.1f} tokens/s]",
        file=sys.stderr,
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra and args.command not in ("bench", "tune"):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if args.backend:
        os.environ["PYRITE_BACKEND"] = args.backend
    if args.device:
        os.environ["PYRITE_DEVICE"] = args.device

    from pyrite.errors import DeviceError

    try:
        if args.command == "info":
            return cmd_info(args)
        if args.command == "demo":
            return cmd_demo(args)
        if args.command == "train":
            return cmd_train(args)
        if args.command == "generate":
            return cmd_generate(args)
        if args.command == "web":
            return cmd_web(args)
        if args.command == "tune":
            return cmd_tune(argv[argv.index("tune") + 1 :])
        return cmd_bench(args, argv[argv.index("bench") + 1 :])
    except DeviceError as err:  # no adapter, or a missing feature: the message names the way out
        print(err, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
