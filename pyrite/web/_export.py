"""`pyrite.web.export`: a function's recording under `pr.compile` written out as a bundle a
browser replays with WebGPU — the same WGSL kernels, dispatch grids and info words pyrite ran.

A bundle is a folder:
- `model.json`: the plan. `buffers` (byte sizes, and where a buffer's first contents lie in
  `model.bin`), `pipelines` (WGSL and binding modes: "r" read-only, "w" read-write storage,
  then the info window at binding len(modes), read-only storage with a dynamic offset),
  `commands` in order — `["d", pipeline, [buffer, ...], [info word, ...], [x, y, z]]` a
  dispatch, `["c", src, src_offset, dst, dst_offset, bytes]` a copy, `["u", buffer, offset,
  bin_offset, bytes]` constant bytes written from `model.bin` — and the `inputs` and `outputs`
  as views (buffer, dtype, shape, strides and offset in elements) of those buffers. `needs`
  says what the device must offer (features, the storage buffers one kernel binds).
- `model.bin`: every buffer's first contents (the parameters and constants the recording read,
  read back now) and the constant uploads, each 4-byte aligned.
- `example.json` / `example.bin` (unless `example=False`): the inputs the export ran and the
  outputs pyrite computed from them, for the page's self-check.
- `pyrite.js` (the runtime, `load(url)` → a model with `run(inputs)`) and `index.html` (a page
  that runs the example and compares).

The format names no Python: `pyrite.web.load` replays it on pyrite's own device through the
same plan, and `pyrite.js` in a browser.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import warnings

import numpy as np

from .. import autograd, backend
from .._fs import write_atomic
from ..backend.device import INFO_WINDOW_WORDS
from ..errors import PyriteError
from ..tensor import Tensor

FORMAT = "pyrite-web"
VERSION = 1
HERE = os.path.dirname(os.path.abspath(__file__))
# weights at least this large are read back under a progress bar (as pr.io.load_gguf's)
PROGRESS_BYTES = 1 << 30


class ExportError(PyriteError, ValueError):
    """The function cannot be exported as a browser bundle (and why)."""


def _names(spec, prefix="output"):
    """The flattened leaves' names of a compile output structure: "output" for a lone tensor,
    "output_0", ... for a tuple or list, the keys of a dict (joined with "." when nested)."""
    out = []

    def walk(s, name, top):
        if s is None:
            out.append(name)
            return
        kind, body = s
        if kind == "v":
            return
        items = body.items() if kind is dict else enumerate(body)
        for k, sub in items:
            key = str(k)
            walk(sub, key if top and kind is dict else f"{name}{'_' if top else '.'}{key}", False)

    walk(spec, prefix, True)
    return out


def _view(t: Tensor, buffer_id: int, name: str) -> dict:
    d = t.dtype
    if d.is_complex:
        raise ExportError(f"pyrite: web.export: {name} is {d.name}; bundles carry real dtypes only")
    return {
        "name": name,
        "buffer": buffer_id,
        "dtype": d.name,
        "storage": np.dtype(d.np).name,
        "shape": list(t._shape),
        "strides": list(t._strides),
        "offset": int(t._offset),
    }


class _Bin:
    """model.bin as it grows: 4-byte aligned pieces, kept in an anonymous temporary file (a
    model's weights need not fit in host memory twice) until `write` copies them out."""

    def __init__(self):
        self.fh = tempfile.TemporaryFile()
        self.size = 0

    def add(self, data) -> int:
        data = memoryview(data).cast("B")
        at = self.size
        self.fh.write(data)
        pad = -len(data) % 4
        if pad:
            self.fh.write(b"\0" * pad)
        self.size += len(data) + pad
        return at

    def write(self, fh):
        self.fh.seek(0)
        shutil.copyfileobj(self.fh, fh, 1 << 24)


def _check_structure(args):
    for i, a in enumerate(args):
        if not isinstance(a, Tensor):
            raise ExportError(
                f"pyrite: web.export: argument {i} is {type(a).__name__}; a bundle's inputs are "
                "tensors (bake other values into the function, e.g. with functools.partial)"
            )


def export(
    fn,
    args,
    path,
    *,
    input_names=None,
    output_names=None,
    example=True,
    portable=True,
    overwrite=True,
):
    """Trace `fn(*args)` (a function or a Module, under no_grad) and write it to the folder
    `path` as a browser bundle (the module docstring). Returns the plan's summary (a dict:
    kernels, pipelines, buffers, bytes, inputs, outputs, needs).

    `args`: a tensor or a tuple of tensors, the example inputs; the bundle takes inputs of
    exactly these shapes and dtypes (every size is baked into its kernels, as `pr.compile`'s
    are). `input_names` / `output_names` name them in the page and in `run()`'s results
    (default "input_0", ..., and "output" / "output_i" / a returned dict's keys).
    `portable=True` traces with kernels that use no subgroup operations (any WebGPU device
    runs them). `example=False` leaves out example.json/.bin.

    Tensors the function makes from Python data (`pr.tensor([...])` inside) are constants of
    the bundle, as traced. Refused, with the reason: a value read back to the host inside
    (`.item()`, a data-dependent shape: a bundle runs no Python to act on it), or values
    refreshed from Python at every call (dropout or another random op: call `model.eval()`;
    an optimizer's step)."""
    from ..compile import CompiledFunction
    from ..compile._guards import stateful

    if isinstance(args, Tensor):
        args = (args,)
    args = tuple(args)
    _check_structure(args)
    # the inputs as given (the example's), and each call's own copies: arguments sharing a
    # storage would share a slot, and a function that writes its inputs must not see its
    # earlier call's writes
    args = tuple(a.detach().clone() for a in args)
    if input_names is not None and len(input_names) != len(args):
        raise ExportError(
            f"pyrite: web.export: {len(input_names)} input_names for {len(args)} inputs"
        )
    path = os.fspath(path)
    if os.path.exists(path) and not os.path.isdir(path):
        raise ExportError(f"pyrite: web.export: {path} exists and is not a folder")
    if os.path.isdir(path) and os.listdir(path) and not overwrite:
        raise ExportError(f"pyrite: web.export: {path} is not empty (overwrite=False)")

    dev = backend.current()
    # (not fullgraph: host data made inside, a tensor of Python numbers, is a constant of the
    # bundle, frozen as traced; what stays refused is a read back to the host, below)
    cf = CompiledFunction(fn, known=(fn,) if stateful(fn) else ())
    # (portable: not every browser's adapter has subgroups, and wgpu-native takes subgroup
    # builtins without the `enable subgroups;` browsers want)
    ctx = dev.without_subgroups() if portable else contextlib.nullcontext()
    with ctx, autograd.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (compile's advice on graph breaks: refused below)
        # (a trace that meets a module or optimizer it did not know of runs eagerly and the
        # next call traces with it watched: a second call then, a third at most)
        for _ in range(3):
            try:
                result = cf(*(a.clone() for a in args))
            except PyriteError as exc:
                if type(exc).__name__ == "GraphBreak":
                    raise ExportError(f"pyrite: web.export: {exc}") from None
                raise
            if cf._last is not None:
                break
    v = cf._last
    if v is None or v.graph is None:
        reasons = [r for vs in cf._variants.values() for x in vs for r in x.reasons]
        raise ExportError(
            "pyrite: web.export: the function could not be recorded whole"
            + (f": {'; '.join(reasons)}" if reasons else "")
        )
    try:
        plan, data, outputs_now = _plan(dev, v, input_names, output_names)
    finally:
        cf.reset()
    del result

    ex = None
    if example:
        ex_bin = _Bin()
        meta = {
            "inputs": _example(plan["inputs"], args, ex_bin),
            "outputs": _example(plan["outputs"], outputs_now, ex_bin),
        }
        ex = (meta, ex_bin)

    os.makedirs(path, exist_ok=True)
    _write(path, "model.bin", data.write)
    text = json.dumps(plan, separators=(",", ":"))
    _write(path, "model.json", lambda fh: fh.write(text.encode()))
    if ex is not None:
        meta, ex_bin = ex
        _write(path, "example.bin", ex_bin.write)
        etext = json.dumps(meta, indent=1)
        _write(path, "example.json", lambda fh: fh.write(etext.encode()))
    for name in ("pyrite.js", "index.html"):
        copy_page(path, name)
    return summary(plan, data.size)


def copy_page(folder, name, as_name=None):
    """Copy the package's page or script `name` (pyrite/web/) into a bundle folder."""
    src = os.path.join(HERE, name)
    _write(folder, as_name or name, lambda fh: _copy_file(src, fh))


def _write(folder, name, write):
    """A bundle file, written whole or not at all, readable by a web server (0644)."""
    write_atomic(os.path.join(folder, name), write, mode=0o644)


def _copy_file(src, fh):
    with open(src, "rb") as f:
        shutil.copyfileobj(f, fh)


def summary(plan, nbytes) -> dict:
    kinds = [c[0] for c in plan["commands"]]
    return {
        "kernels": kinds.count("d"),
        "copies": kinds.count("c") + kinds.count("u"),
        "pipelines": len(plan["pipelines"]),
        "buffers": len(plan["buffers"]),
        "buffer_bytes": sum(b["size"] for b in plan["buffers"]),
        "bin_bytes": nbytes,
        "inputs": [(s["name"], tuple(s["shape"]), s["dtype"]) for s in plan["inputs"]],
        "outputs": [(s["name"], tuple(s["shape"]), s["dtype"]) for s in plan["outputs"]],
        "needs": plan["needs"],
    }


def _example(specs, tensors, ex_bin) -> list:
    """example.json's entries for these tensors: their values (_logical) in example.bin."""
    out = []
    for spec, t in zip(specs, tensors):
        vals = _logical(t)
        out.append(
            {
                "name": spec["name"],
                "at": ex_bin.add(vals.tobytes()),
                "bytes": vals.nbytes,
                "type": vals.dtype.name,
            }
        )
    return out


def _logical(t: Tensor) -> np.ndarray:
    """A tensor's values as the page compares them: float32 for every float dtype, int32 for
    every integer, uint8 (0/1) for bool."""
    d = t.dtype
    a = t.detach().float().numpy() if d.is_floating_point else t.detach().numpy()
    if d.is_bool:
        return np.ascontiguousarray(a.astype(np.uint8))
    if d.is_floating_point:
        return np.ascontiguousarray(a.astype(np.float32))
    return np.ascontiguousarray(a.astype(np.int32))


def _plan(dev, v, input_names, output_names):
    """(plan dict, model.bin, the outputs the trace computed) for a finished compile variant."""
    g = v.graph
    tape = g.tape
    if tape.regions or tape.dynamic:
        raise ExportError(
            "pyrite: web.export: the function has values Python refreshes at every call (a "
            "random op such as dropout, or an optimizer step); a bundle replays fixed kernels. "
            "Export the model in eval mode (model.eval()), without random ops"
        )
    reads = [(what, where) for what, where in tape.soft if "reads a value back" in what]
    if reads or any(op.kind == "r" and op.args[1] != "cut" for op in tape.ops):
        what, where = reads[0] if reads else ("reads a value back to the host", "?")
        raise ExportError(
            f"pyrite: web.export: the function {what.split(': ', 1)[-1]} at {where}; a bundle "
            "replays its kernels without Python, so the value could not steer it. Return the "
            "tensor instead, and decide from it in the page"
        )

    ids: dict[int, int] = {}
    buffers: list[dict] = []
    objs: list = []
    data = _Bin()
    external = {**tape.borrowed, **tape.external}

    def buf(b) -> int:
        k = ids.get(id(b))
        if k is None:
            k = ids[id(b)] = len(buffers)
            buffers.append({"size": int(b.size)})
            objs.append(b)
        return k

    pipelines: list[dict] = []
    pipe_ix: dict[str, int] = {}
    sources: dict[int, str | None] = {}  # id(pipeline) -> its WGSL
    commands = []
    storage_max = 0
    features = set()
    for op in tape.ops:
        if op.kind == "d":
            pipeline, modes, bufs, words, grid = op.args
            modes = modes[: len(bufs)]  # (a checked trusted kernel's violation word: not ours)
            text = sources.get(id(pipeline))
            if text is None:
                text = sources[id(pipeline)] = dev.source_of(pipeline)
            if text is None:
                raise ExportError("pyrite: web.export: internal: a kernel's WGSL is unknown")
            key = f"{modes}\n{text}"
            p = pipe_ix.get(key)
            if p is None:
                p = pipe_ix[key] = len(pipelines)
                pipelines.append({"wgsl": text, "modes": modes})
                for line in text.splitlines():
                    s = line.strip()
                    if s.startswith("enable "):
                        features.update(x.strip() for x in s[7:].rstrip(";").split(","))
            storage_max = max(storage_max, len(modes) + 1)
            w = [] if words is None else [int(x) for x in words]
            commands.append(["d", p, [buf(b) for b in bufs], w, [int(x) for x in grid]])
        elif op.kind == "c":
            src, so, dst, do, n = op.args
            commands.append(["c", buf(src), int(so), buf(dst), int(do), int(n)])
        elif op.kind == "u":
            b, off, raw = op.args
            commands.append(["u", buf(b), int(off), data.add(raw), len(raw)])

    inputs = []
    for i, s in enumerate(v.slots):
        name = input_names[i] if input_names is not None else f"input_{i}"
        inputs.append(_view(s, buf(s._storage.buffer), name))
    names = _names(v.out_spec)
    outs = [t for _, t in v.outputs][: len(names)]
    if output_names is not None:
        if len(output_names) != len(outs):
            raise ExportError(
                f"pyrite: web.export: {len(output_names)} output_names for {len(outs)} outputs"
            )
        names = list(output_names)
    if not outs:
        raise ExportError("pyrite: web.export: the function returns no tensor")
    outputs = [_view(t, buf(t._storage.buffer), n) for t, n in zip(outs, names)]
    for what, specs in (("input", inputs), ("output", outputs)):
        seen = [x["name"] for x in specs]
        if len(set(seen)) != len(seen):
            raise ExportError(f"pyrite: web.export: two {what}s have one name: {seen}")

    # first contents: what the recording read that it did not make (parameters, constants),
    # and its own buffers that a command reads before any writes them (constants the passes
    # took out of the replay: uploaded once while tracing, kept since)
    slot_ids = {id(s._storage.buffer) for s in v.slots}
    early = _read_before_written(tape.ops, slot_ids)
    first = [
        k for k, b in enumerate(objs)
        if (id(b) in external or id(b) in early) and id(b) not in slot_ids
    ]  # fmt: skip
    for k in _progress(first, sum(objs[k].size for k in first)):
        b = objs[k]
        raw = dev.read(b, 0, b.size)
        buffers[k]["init"] = [data.add(raw), len(raw)]

    # the outputs as the recording left them (the trace's values; a replay writes the same)
    now = [Tensor._make(t._storage, t._shape, t._strides, t._offset, t.dtype) for t in outs]
    needs = {
        "features": sorted({"f16": "shader-f16"}.get(f, f) for f in features),
        "maxStorageBuffersPerShaderStage": storage_max,
        "maxStorageBufferBindingSize": max((b["size"] for b in buffers), default=4),
        "maxBufferSize": max((b["size"] for b in buffers), default=4),
    }
    plan = {
        "format": FORMAT,
        "version": VERSION,
        "pyrite": _version(),
        "traced_on": f"{dev.name} ({dev.impl})",
        "info_words": INFO_WINDOW_WORDS,
        "needs": needs,
        "buffers": buffers,
        "pipelines": pipelines,
        "commands": commands,
        "inputs": inputs,
        "outputs": outputs,
    }
    return plan, data, now


def _progress(items, nbytes):
    """`items`, under a progress bar (tqdm, where installed) when their bytes reach
    PROGRESS_BYTES: reading a large model's weights back takes a while."""
    if nbytes < PROGRESS_BYTES:
        return items
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return items
    return tqdm(items, desc=f"web.export: weights ({nbytes / 2**30:.1f} GiB)", unit="buffer")


def _read_before_written(ops, written) -> set:
    """ids of the buffers a command reads (a read-only binding, a copy's source) before any
    command writes them; `written`: ids written before the first (the inputs' slots)."""
    written = set(written)
    early = set()
    for op in ops:
        if op.kind == "d":
            _, modes, bufs, _, _ = op.args
            for b, m in zip(bufs, modes):
                if m == "r" and id(b) not in written:
                    early.add(id(b))
            written.update(id(b) for b, m in zip(bufs, modes) if m == "w")
        elif op.kind == "c":
            if id(op.args[0]) not in written:
                early.add(id(op.args[0]))
            written.add(id(op.args[2]))
        elif op.kind == "u":
            written.add(id(op.args[0]))
    return early


def _version() -> str:
    from ..version import __version__

    return __version__
