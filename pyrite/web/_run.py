"""`pyrite.web.load`: a bundle (`pyrite.web.export`'s folder) replayed on pyrite's own device,
command by command from its plan, as `pyrite.js` replays it in a browser. It reads nothing but
the bundle's files, so it checks that the plan holds everything a replay needs, and it runs a
bundle from Python without the code that made it."""

from __future__ import annotations

import json
import os
from types import SimpleNamespace

import numpy as np

from .. import autograd, backend
from .. import dtypes as D
from ..errors import DeviceError
from ..tensor import Tensor
from ._export import FORMAT, VERSION, ExportError, _Bin, _example, _write


def _as_tensor(x, spec) -> Tensor:
    from ..ops.creation import tensor as make

    return make(np.asarray(x), dtype=D._by_name(spec["dtype"]))


def _read_plan(path):
    name = os.path.join(path, "model.json")
    if not os.path.isfile(name):
        raise ExportError(f"pyrite: web.load: {path} holds no model.json (not a bundle)")
    try:
        with open(name, "rb") as fh:
            plan = json.loads(fh.read())
    except (ValueError, UnicodeDecodeError) as exc:
        raise ExportError(f"pyrite: web.load: {name} is damaged: {exc}") from None
    if not isinstance(plan, dict):
        plan = {}
    if plan.get("format") != FORMAT or plan.get("version") != VERSION:
        raise ExportError(
            f"pyrite: web.load: {path} is not a pyrite web bundle of version {VERSION} "
            f"(format {plan.get('format')!r}, version {plan.get('version')!r})"
        )
    return plan


class Bundle:
    """A loaded bundle: call it with the inputs (tensors or arrays of the exported shapes) to
    get the outputs as tensors (one, or a tuple). `inputs` / `outputs` describe them."""

    def __init__(self, path):
        path = os.fspath(path)
        plan = _read_plan(path)
        data = np.fromfile(os.path.join(path, "model.bin"), dtype=np.uint8)
        ends = [b["init"][0] + b["init"][1] for b in plan["buffers"] if "init" in b]
        ends += [c[3] + c[4] for c in plan["commands"] if c[0] == "u"]
        if max(ends, default=0) > data.size:
            raise ExportError(
                f"pyrite: web.load: {path}/model.bin has {data.size} bytes where the plan reads "
                f"{max(ends)}: the file is truncated"
            )
        dev = backend.current()
        for f in plan["needs"]["features"]:
            if f == "shader-f16":
                backend.require_f16(dev, "this bundle")
            elif f == "subgroups" and dev.subgroups != 2:
                raise DeviceError(
                    f"pyrite: web.load: the bundle's kernels use subgroups as browsers spell "
                    f"them, which {dev.name} through {dev.impl} does not take; export it with "
                    "portable=True"
                )
        self.plan = plan
        self.device = dev
        self.inputs = plan["inputs"]
        self.outputs = plan["outputs"]
        # (upload=True: buffers no pending command uses, since the first contents are written
        # through the queue, ahead of the batch being recorded)
        self.storages = [dev.pool.allocate(b["size"], upload=True) for b in plan["buffers"]]
        for b, st in zip(plan["buffers"], self.storages):
            if "init" in b:
                at, n = b["init"]
                dev.upload(st, data[at : at + n])
        self.kernels = [
            SimpleNamespace(wgsl=p["wgsl"], modes=p["modes"]) for p in plan["pipelines"]
        ]
        # constant writes ("u"): their bytes in storages of their own, copied in at their turn
        self.consts = {}
        for k, c in enumerate(plan["commands"]):
            if c[0] == "u":
                at, n = c[3], c[4]
                raw = data[at : at + n].tobytes()
                self.consts[k] = dev.upload_new(raw + b"\0" * (-n % 4))

    def _slot(self, spec):
        st = self.storages[spec["buffer"]]
        return Tensor._make(
            st,
            tuple(spec["shape"]),
            tuple(spec["strides"]),
            spec["offset"],
            D._by_name(spec["dtype"]),
        )

    def __call__(self, *inputs):
        if len(inputs) != len(self.inputs):
            raise TypeError(
                f"pyrite: the bundle takes {len(self.inputs)} inputs "
                f"({', '.join(s['name'] for s in self.inputs)}), got {len(inputs)}"
            )
        dev = self.device
        with autograd.no_grad():
            for spec, x in zip(self.inputs, inputs):
                dtype = D._by_name(spec["dtype"])
                if not isinstance(x, Tensor):
                    x = _as_tensor(x, spec)
                if tuple(x.shape) != tuple(spec["shape"]):
                    raise ValueError(
                        f"pyrite: the bundle's input {spec['name']} has shape "
                        f"{tuple(spec['shape'])} (baked into its kernels), got {tuple(x.shape)}"
                    )
                self._slot(spec).copy_(x.to(dtype))
            bufs = [s.buffer for s in self.storages]
            for k, c in enumerate(self.plan["commands"]):
                if c[0] == "d":
                    _, p, ix, words, grid = c
                    dev.dispatch(self.kernels[p], [bufs[i] for i in ix], words, grid)
                elif c[0] == "c":
                    _, s, so, d, do, n = c
                    dev.copy(bufs[s], so, bufs[d], do, n)
                else:
                    _, d, off, _, n = c
                    dev.copy(self.consts[k].buffer, 0, bufs[d], off, (n + 3) & ~3)
            outs = tuple(self._slot(spec).clone() for spec in self.outputs)
        return outs[0] if len(outs) == 1 else outs


def load(path) -> Bundle:
    """The bundle in folder `path` (pyrite.web.export), ready to run on the current device."""
    return Bundle(path)


def write_example(path, *inputs) -> None:
    """Make `inputs` the example of the bundle in folder `path` (the page's self-check runs
    them): example.json/.bin get them and the outputs the bundle computes from them here."""
    b = load(path)
    outs = b(*inputs)
    outs = outs if isinstance(outs, tuple) else (outs,)
    xs = [x if isinstance(x, Tensor) else _as_tensor(x, spec) for x, spec in zip(inputs, b.inputs)]
    ex_bin = _Bin()
    meta = {"inputs": _example(b.inputs, xs, ex_bin), "outputs": _example(b.outputs, outs, ex_bin)}
    text = json.dumps(meta, indent=1)
    _write(path, "example.bin", ex_bin.write)
    _write(path, "example.json", lambda fh: fh.write(text.encode()))
