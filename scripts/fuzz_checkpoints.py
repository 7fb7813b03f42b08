"""Randomized differential fuzz of checkpoint interchange between pyrite and torch 2.13 CPU
(session 45): pr.save / pr.load against torch.save / torch.load and safetensors.torch.

Each seed draws an object to save, instantiated once in each library from one description:
nested dicts / OrderedDicts (some with a state dict's `_metadata`) / lists / tuples / Counters
/ sets of tensors and plain values (ints up to 2^62, floats with nan / inf / -0.0 /
subnormals, strings, bytes, bytearrays, complex numbers, None, bools, dtypes, Sizes); tensors
of every dtype both libraries have (float32, float16, bfloat16, int8/16/32/64, uint8, bool,
complex64, float64; values representable in pyrite's int32 / float32, so that int64 and
float64 map exactly) with shapes 0-d, empty, 1-element and awkward, as views of a few bases
(transpose, permute, stepped slices, select, narrow, diagonal, unsqueeze + expand, flip: a
copy in both), several views of one storage and one tensor object in several places (tied);
whole state dicts of small modules (Linear, Conv2d, BatchNorm with num_batches_tracked,
Embedding, LSTM) and optimizer state dicts (Adam, SGD with momentum) after a step. Or, one
seed in four, a module + optimizer resume.

Directions, each comparing what was saved with what was loaded, in the saving library's terms:
  a  pr.save (path and BytesIO) -> torch.load(weights_only=True / False / mmap=True)
  b  torch.save (zip and legacy `_use_new_zipfile_serialization=False`) -> pr.load (weights_only
     True / False), and that pyrite object saved again by pyrite -> torch.load
  c  pr.save -> pr.load, through the torch zip format and through a `.safetensors` name
  d  a flat dict of tensors: safetensors.torch.save_file -> pr.load, and pr.save(...
     ".safetensors") -> safetensors.torch.load_file
  e  a torch module + optimizer trained a step, torch.save -> pr.load -> the pyrite module's
     and optimizer's load_state_dict, the next step from the same gradients vs torch's; then
     the pyrite pair saved by pr.save -> torch.load -> a fresh torch pair, one more step
  f  failures: a save into a missing folder, into a read-only place (/sys) and over a folder,
     of an unpicklable object (over a previous file), truncated and byte-flipped files.
Compared: Python structure and types (OrderedDict `_metadata`, Counter, set, tuple vs list,
key order), plain values exactly (floats bitwise), tensors' dtypes, shapes and values bitwise,
Parameter-ness and requires_grad, strides where the format keeps them, which tensors share a
storage (and which are one object) on each side; failures: a clear error (a pyrite error or an
OSError / pickle error naming the target path, never a raw one from deep inside, never one
naming pyrite's temporary file) and the target absent or unchanged after a failed save.

Classified as intentional (pyrite's documented choices, README "Differences from PyTorch" and
pyrite/io's docstrings), mapped or skipped rather than failures:
- int64 is int32 and float64 is float32 (complex128 complex64) in pyrite: a torch int64 /
  float64 tensor loads as int32 / float32 with the same values (values are drawn to fit), and
  pyrite writes int32 / float32 (torch.load gives those); a state dict's num_batches_tracked
  is int32 in a pyrite file (torch's load_state_dict casts it).
- pr.save of an empty tensor writes a storage of its own and contiguous strides (nothing to
  share, nothing to read), so an empty view's strides and sharing are not compared.
- a `.safetensors` name makes pr.save write safetensors: its tensors are contiguous copies
  (no strides kept), views of one storage are separate tensors, and identical views (the same
  tensor twice, tied weights) are stored once: in load_file's flat dict only the first key of
  a tied group is present (as safetensors.torch.save_model does); pr.load restores them.
- torch refuses ("both tensors share memory") safetensors.torch.save_file of shared or
  non-contiguous tensors: direction d saves contiguous clones.
- the module + optimizer resume compares the step after loading with a tolerance (16 u of
  the largest parameter), not bitwise: pyrite's kernels round differently from torch's.
- torch.load(mmap=True) of a BytesIO is refused by torch; not run.
- torch refuses (weights_only) its own torch.save of b"" (protocol 2 pickles it as the global
  `bytes`): pr.load refuses that file too; pyrite's own b"" is written so that both read it.
- a safetensors file has no key order: a foreign one's keys are compared as a set.
Found and fixed (tests/test_fuzz_checkpoints45.py): sets / bytearrays / complex numbers in
torch files refused (protocol 2's `__builtin__` names); pr.save of sets / bytearrays not in
torch's format, and of b"" unreadable by both; complex views from torch files loaded as
copies (strides and sharing lost); safetensors C64 refused and complex64 written as float
pairs; a Size in the .safetensors container came back a tuple; bf16 NaN payloads of views
rewritten in .safetensors files; failed saves' OSErrors named pyrite's temporary file; a
flipped zip flag bit raised zipfile's raw RuntimeError. Not pyrite/io's, reported: the
bfloat16 copy kernel (`x.T.contiguous()`) turns every NaN into 0x7fc0 (float16 / float32
keep payloads), so the harness reads bf16 views' words from their storage.

    .venv/bin/python scripts/fuzz_checkpoints.py --seeds 0:300 [--show 17] [--verbose]
"""

from __future__ import annotations

import collections
import copy
import io
import math
import os
import pickle
import shutil
import struct
import sys
import tempfile
import threading
import warnings

import numpy as np
import safetensors.torch
import torch

import pyrite as pr
from pyrite.errors import PyriteError
from pyrite.io._host import tensor_to_host

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import fuzz_driver  # noqa: E402

DTYPES = (
    "float32", "float16", "bfloat16", "int8", "int16", "int32", "int64", "uint8", "bool",
    "complex64", "float64",
)  # fmt: skip
# torch dtype name -> pyrite's (README: int64 is int32, float64 float32, complex128 complex64)
MAPPED = {"int64": "int32", "float64": "float32", "complex128": "complex64"}
SHAPES = ((), (0,), (1,), (7,), (3, 5), (0, 4), (4, 1, 6), (2, 3, 4), (5, 5), (1, 1), (13, 3),
          (2, 1, 3, 2), (17,), (6, 0, 2))  # fmt: skip
F32_U = 2.0**-24


# ---- drawing values -----------------------------------------------------------------------
def draw(rng, name, shape):
    """A numpy array of dtype `name` (bfloat16: float32 values exact in bf16; int64 / float64:
    values exact in int32 / float32), with special values now and then."""
    n = int(np.prod(shape))
    if name == "bool":
        return rng.random(shape) < 0.5
    if name in ("int8", "int16", "int32", "int64", "uint8"):
        info = np.iinfo(name if name != "int64" else "int32")
        a = rng.integers(int(info.min), int(info.max), shape, endpoint=True, dtype=np.int64)
        if n and rng.random() < 0.5:  # the extremes
            a.flat[rng.integers(0, n)] = info.min
            a.flat[rng.integers(0, n)] = info.max
        return a.astype(name)
    if name == "complex64":
        out = np.empty(shape, np.complex64)
        out.real, out.imag = draw(rng, "float32", shape), draw(rng, "float32", shape)
        return out
    scale = float(rng.choice([1e-3, 1.0, 1e3]))
    a = (rng.standard_normal(shape) * scale).astype(np.float32)
    specials = {
        "float32": [np.nan, np.inf, -np.inf, -0.0, 1e-40, -3e-45, 3.4e38],
        "float64": [np.nan, np.inf, -np.inf, -0.0, 1e-40, 3.4e38],
        "float16": [np.nan, np.inf, -np.inf, -0.0, 6e-8, 65504.0],
        "bfloat16": [np.nan, np.inf, -np.inf, -0.0, 1e-39, 3.38e38],
    }[name]
    if n and rng.random() < 0.5:
        for _ in range(int(rng.integers(1, 4))):
            a.flat[rng.integers(0, n)] = specials[int(rng.integers(0, len(specials)))]
    if name == "float16":
        return a.astype(np.float16)
    if name == "bfloat16":  # (the upper 16 bits: exact in bf16)
        return (a.view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32)
    return a.astype(np.float32 if name == "float32" else np.float64)


def lib_tensor(lib, name, arr):
    if lib is torch:
        t = torch.from_numpy(np.array(arr))
        return t.to(torch.bfloat16) if name == "bfloat16" else t
    t = pr.tensor(np.array(arr))
    return t.to(pr.bfloat16) if name == "bfloat16" else t


# ---- the description --------------------------------------------------------------------
class Spec:
    """What a seed saves: a tree of nodes (tuples), tensor bases, and tensors as views."""

    def __init__(self, seed):
        self.seed = seed
        self.bases = []  # (dtype name, numpy array)
        self.tensors = []  # (base index, view ops, parameter?, requires_grad)
        self.tree = None
        self.kind = "object"  # or "resume"
        self.resume = None  # (module kind, cfg, optimizer kind, fmt)
        self.flat = False


def view_ops(rng, shape):
    """A short list of view ops valid on `shape` (the same in both libraries)."""
    ops, shape = [], list(shape)
    for _ in range(int(rng.integers(0, 4))):
        nd = len(shape)
        k = int(rng.integers(0, 9))
        if k == 0 and nd >= 2:
            d0, d1 = (int(x) for x in rng.choice(nd, 2, replace=False))
            ops.append(("transpose", d0, d1))
            shape[d0], shape[d1] = shape[d1], shape[d0]
        elif k == 1 and nd >= 1:
            d = int(rng.integers(0, nd))
            n = shape[d]
            a = int(rng.integers(0, n + 1))
            b = int(rng.integers(a, n + 1))
            step = int(rng.choice([1, 2, 3, 5]))
            ops.append(("slice", d, a, b, step))
            shape[d] = len(range(a, b, step))
        elif k == 2 and nd >= 1 and all(shape):
            d = int(rng.integers(0, nd))
            ops.append(("select", d, int(rng.integers(0, shape[d]))))
            del shape[d]
        elif k == 3 and nd >= 2:
            perm = [int(x) for x in rng.permutation(nd)]
            ops.append(("permute", perm))
            shape = [shape[p] for p in perm]
        elif k == 4 and nd >= 2:
            ops.append(("diagonal",))
            m = min(shape[0], shape[1])
            shape = shape[2:] + [m]
        elif k == 5 and nd <= 3:
            reps = int(rng.choice([1, 2, 3]))
            ops.append(("expand", reps))
            shape = [reps] + shape
        elif k == 6 and nd >= 1:
            d = int(rng.integers(0, nd))
            ops.append(("flip", d))  # (a copy in both libraries)
        elif k == 7 and nd >= 1:
            d = int(rng.integers(0, nd))
            a = int(rng.integers(0, shape[d] + 1))
            ln = int(rng.integers(0, shape[d] - a + 1))
            ops.append(("narrow", d, a, ln))
            shape[d] = ln
        elif k == 8:
            d = int(rng.integers(0, nd + 1))
            ops.append(("unsqueeze", d))
            shape.insert(d, 1)
    return ops


def apply_ops(t, ops):
    for op in ops:
        if op[0] == "transpose":
            t = t.transpose(op[1], op[2])
        elif op[0] == "slice":
            idx = (slice(None),) * op[1] + (slice(op[2], op[3], op[4]),)
            t = t[idx]
        elif op[0] == "select":
            t = t.select(op[1], op[2])
        elif op[0] == "permute":
            t = t.permute(*op[1])
        elif op[0] == "diagonal":
            t = t.diagonal()
        elif op[0] == "expand":
            t = t.unsqueeze(0).expand(op[1], *t.shape)
        elif op[0] == "flip":
            t = t.flip(op[1])
        elif op[0] == "narrow":
            t = t.narrow(op[1], op[2], op[3])
        elif op[0] == "unsqueeze":
            t = t.unsqueeze(op[1])
    return t


KEYS = ("w", "bias", "layer.0.weight", "", "é", "state", "x" * 40, "__metadata__", "0")


def plain_value(rng):
    k = int(rng.integers(0, 12))
    return [
        lambda: int(rng.integers(-(2**31), 2**31)),
        lambda: int(rng.choice([0, 1, -1, 2**40, -(2**62), 2**31, 7])),
        lambda: float(rng.standard_normal()),
        lambda: float(rng.choice([math.nan, math.inf, -math.inf, -0.0, 5e-324, 1e308, 0.1])),
        lambda: str(rng.choice(["", "adam", "é∑😀", "a\nb\x00", "x" * 300])),
        lambda: None,
        lambda: bool(rng.random() < 0.5),
        lambda: bytes(rng.integers(0, 256, int(rng.integers(0, 6)), dtype=np.uint8)),
        lambda: complex(float(rng.standard_normal()), -0.0),
        lambda: ("dtype", str(rng.choice(DTYPES))),
        lambda: ("size", tuple(int(x) for x in rng.integers(0, 5, int(rng.integers(0, 4))))),
        lambda: bytearray(b"\x01\x02"),
    ][k]()


class Gen:
    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.s = Spec(seed)

    def r(self, k):
        return int(self.rng.integers(0, k))

    def new_base(self):
        name = DTYPES[self.r(len(DTYPES))]
        shape = SHAPES[self.r(len(SHAPES))]
        self.s.bases.append((name, draw(self.rng, name, shape)))
        return len(self.s.bases) - 1

    def tensor(self):
        """A tensor node: often a new view of an earlier base, now and then a tensor again."""
        if self.s.tensors and self.rng.random() < 0.15:  # tied: the same object again
            return ("tensor", self.r(len(self.s.tensors)))
        if self.s.bases and self.rng.random() < 0.5:
            b = self.r(len(self.s.bases))
        else:
            b = self.new_base()
        ops = view_ops(self.rng, self.s.bases[b][1].shape)
        floating = self.s.bases[b][0] in ("float32", "float16", "bfloat16", "float64")
        param = floating and not ops and self.rng.random() < 0.2
        grad = floating and not ops and self.rng.random() < 0.3
        self.s.tensors.append((b, ops, param, grad))
        return ("tensor", len(self.s.tensors) - 1)

    def key(self):
        k = self.r(4)
        if k == 0:
            return int(self.rng.integers(-3, 100))
        if k == 1 and self.rng.random() < 0.3:
            return (self.r(3), str(self.r(3)))
        return str(KEYS[self.r(len(KEYS))]) + str(self.r(50))

    def node(self, depth):
        k = self.r(10)
        if depth >= 3 or k < 4:
            return (
                self.tensor() if k < 2 or depth >= 3 and k < 5 else ("plain", plain_value(self.rng))
            )
        if k == 4:
            items = [(self.key(), self.node(depth + 1)) for _ in range(self.r(5))]
            meta = None
            if self.rng.random() < 0.5:
                meta = {"": {"version": self.r(3)}, "sub": {"version": 1}}
            return ("odict", items, meta)
        if k == 5:
            return ("dict", [(self.key(), self.node(depth + 1)) for _ in range(self.r(5))])
        if k == 6:
            return ("list", [self.node(depth + 1) for _ in range(self.r(5))])
        if k == 7:
            return ("tuple", [self.node(depth + 1) for _ in range(self.r(4))])
        if k == 8:
            c = self.r(4)
            if c == 0:
                return ("counter", [int(x) for x in self.rng.integers(0, 5, 4)])
            if c == 1:
                return ("set", [int(x) for x in self.rng.integers(0, 9, self.r(4))] + ["s"])
            if c == 2:
                return ("optim", ("adam", "sgd")[self.r(2)], self.r(3))
        return ("module", MODULES[self.r(len(MODULES))], self.r(1000))

    def build(self):
        if self.r(4) == 0:
            self.s.kind = "resume"
            self.s.resume = (
                MODULES[self.r(len(MODULES))],
                self.r(1000),
                ("adam", "sgd")[self.r(2)],
                ("zip", "legacy")[self.r(2)],
            )
            return self.s
        if self.r(4) == 0:  # a flat dict of tensors (safetensors both ways)
            self.s.flat = True
            items, names = [], set()
            for _ in range(1 + self.r(6)):
                k = f"{KEYS[self.r(len(KEYS))]}{self.r(99)}"
                if k in names:
                    continue
                names.add(k)
                items.append((k, self.tensor()))
            self.s.tree = ("dict", items)
            return self.s
        self.s.tree = ("dict", [(self.key(), self.node(0)) for _ in range(1 + self.r(6))])
        return self.s


# ---- modules and optimizers ----------------------------------------------------------------
MODULES = ("linear", "conv2d", "batchnorm1d", "batchnorm2d", "embedding", "lstm")


def make_module(lib, kind, cfg, values=0):
    """A module of `kind` configured by `cfg`, its parameters drawn from (cfg, values)."""
    nn = lib.nn
    g = np.random.default_rng(cfg)
    if kind == "linear":
        m = nn.Linear(1 + cfg % 5, 1 + cfg % 3, bias=cfg % 2 == 0)
        x = g.standard_normal((3, 1 + cfg % 5))
    elif kind == "conv2d":
        m = nn.Conv2d(2, 3, 1 + cfg % 3, stride=1 + cfg % 2, padding=cfg % 2, bias=cfg % 3 != 0)
        x = g.standard_normal((2, 2, 5, 6))
    elif kind == "batchnorm1d":
        m = nn.BatchNorm1d(3 + cfg % 3, affine=cfg % 2 == 0)
        x = g.standard_normal((4, 3 + cfg % 3))
    elif kind == "batchnorm2d":
        m = nn.BatchNorm2d(2 + cfg % 2, momentum=None if cfg % 3 == 0 else 0.2)
        x = g.standard_normal((3, 2 + cfg % 2, 3, 2))
    elif kind == "embedding":
        m = nn.Embedding(7, 1 + cfg % 4, padding_idx=cfg % 7 if cfg % 2 else None)
        x = g.integers(0, 7, (5,))
    else:
        m = nn.LSTM(3, 2 + cfg % 3, num_layers=1 + cfg % 2, bidirectional=cfg % 3 == 0)
        x = g.standard_normal((4, 2, 3))
    gv = np.random.default_rng((cfg, values))
    with torch.no_grad() if lib is torch else pr.no_grad():
        for name, p in m.named_parameters():  # the same values in both libraries
            v = gv.standard_normal(tuple(p.shape)).astype(np.float32) * 0.5
            p.copy_(lib.tensor(v))
    x = x.astype(np.int64) if kind == "embedding" else x.astype(np.float32)
    return m, x


def forward(m, kind, x, lib):
    t = lib.tensor(x)
    out = m(t)
    return out[0] if kind == "lstm" else out


def make_optimizer(lib, kind, params):
    if kind == "adam":
        return lib.optim.Adam(params, lr=0.01, betas=(0.8, 0.95), weight_decay=0.01)
    return lib.optim.SGD(params, lr=0.05, momentum=0.9, dampening=0.1, weight_decay=1e-3)


def trained(lib, kind, cfg, opt_kind=None):
    """A module (and optimizer) of `lib` after one training step."""
    m, x = make_module(lib, kind, cfg)
    m.train()
    opt = make_optimizer(lib, opt_kind, m.parameters()) if opt_kind else None
    out = forward(m, kind, x, lib)
    if any(p.requires_grad for p in m.parameters()):  # (BatchNorm(affine=False): none)
        (out * out).mean().backward()
    if opt:
        opt.step()
    return m, opt


# ---- instantiating --------------------------------------------------------------------------
def instantiate(spec: Spec, lib):
    """The object `spec` describes, made of `lib`'s tensors."""
    bases = {}
    made = {}

    def base(b):
        if b not in bases:
            name, arr = spec.bases[b]
            bases[b] = lib_tensor(lib, name, arr)
        return bases[b]

    def tensor(i):
        if i not in made:
            b, ops, param, grad = spec.tensors[i]
            t = apply_ops(base(b), ops)
            if param:
                t = lib.nn.Parameter(t.clone(), requires_grad=grad)
            elif grad:
                t = t.clone().requires_grad_(True)
            made[i] = t
        return made[i]

    def build(n):
        kind = n[0]
        if kind == "tensor":
            return tensor(n[1])
        if kind == "plain":
            v = n[1]
            if isinstance(v, tuple) and v[0] == "dtype":
                return getattr(lib, v[1])
            if isinstance(v, tuple) and v[0] == "size":
                return torch.Size(v[1]) if lib is torch else pr.Size(v[1])
            return copy.copy(v)
        if kind == "dict":
            return {k: build(v) for k, v in n[1]}
        if kind == "odict":
            out = collections.OrderedDict((k, build(v)) for k, v in n[1])
            if n[2] is not None:
                out._metadata = copy.deepcopy(n[2])
            return out
        if kind == "list":
            return [build(v) for v in n[1]]
        if kind == "tuple":
            return tuple(build(v) for v in n[1])
        if kind == "counter":
            return collections.Counter(n[1])
        if kind == "set":
            return set(n[1])
        if kind == "module":
            m, _ = trained(lib, n[1], n[2])
            return m.state_dict()
        if kind == "optim":
            _, opt = trained(lib, ("linear", "batchnorm2d")[n[2] % 2], n[2], n[1])
            return opt.state_dict()
        raise AssertionError(kind)

    return build(spec.tree)


# ---- comparing ------------------------------------------------------------------------------
def is_tensor(x):
    return isinstance(x, (torch.Tensor, pr.Tensor))


def dtype_name(t):
    return str(t.dtype).split(".")[-1]


def host(t):
    """(dtype name, numpy array of the values in their own width: bfloat16 as uint16 words)."""
    name = dtype_name(t)
    if isinstance(t, torch.Tensor):
        t = t.detach()
        if name == "bfloat16":
            return name, t.contiguous().view(torch.int16).numpy().view(np.uint16).copy()
        return name, t.contiguous().numpy().copy()
    if name == "bfloat16" and t.numel() and not t.is_contiguous():
        # (the words themselves: a bf16 copy kernel may rewrite a NaN's payload)
        t = t.detach()
        lo = t._offset + sum((s - 1) * st for s, st in zip(t.shape, t._strides) if st < 0)
        hi = t._offset + sum((s - 1) * st for s, st in zip(t.shape, t._strides) if st > 0)
        words = tensor_to_host(t.as_strided((hi - lo + 1,), (1,), lo))
        view = np.lib.stride_tricks.as_strided(
            words[t._offset - lo :], tuple(t.shape), tuple(2 * st for st in t._strides)
        )
        return name, view.copy()
    return name, tensor_to_host(t)


def bits(a):
    if a.dtype == np.bool_:
        return a
    if a.dtype.kind == "c":
        a = np.ascontiguousarray(a).view(a.real.dtype)
    return np.ascontiguousarray(a).view(f"u{a.dtype.itemsize}")


def storage_key(t):
    if isinstance(t, torch.Tensor):
        return t.untyped_storage().data_ptr()
    return id(t._storage)


def is_param(t):
    return isinstance(t, (torch.nn.Parameter, pr.nn.Parameter))


class Compare:
    """Compares a saved object (src) with what was loaded (got); `mapped`: a torch object read
    by pyrite (int64 -> int32, ...); `strides`: the format keeps strides; `sharing`: it keeps
    views of one storage as views; `identity`: the same object twice stays one object."""

    def __init__(
        self, mapped=False, strides=True, sharing=True, identity=True, params=True, order=True
    ):
        self.mapped, self.strides, self.sharing, self.identity = mapped, strides, sharing, identity
        self.params, self.order = params, order
        self.errors = []
        self.pairs = []  # (path, src tensor, got tensor)

    def err(self, path, msg):
        self.errors.append(f"{path or '<root>'}: {msg}")

    def run(self, src, got):
        self.walk(src, got, "")
        self.check_sharing()
        return self.errors

    def walk(self, a, b, p):
        if is_tensor(a):
            if not is_tensor(b):
                return self.err(p, f"tensor became {type(b).__name__}")
            return self.tensor(a, b, p)
        if isinstance(a, (torch.dtype, pr.dtype)):
            if not isinstance(b, (torch.dtype, pr.dtype)):
                return self.err(p, f"dtype became {b!r}")
            na, nb = str(a).split(".")[-1], str(b).split(".")[-1]
            if nb != MAPPED.get(na, na) and nb != na:
                self.err(p, f"dtype {a} became {b}")
            return None
        if isinstance(a, (torch.Size, pr.Size)):
            if not isinstance(b, (torch.Size, pr.Size)) or tuple(a) != tuple(b):
                self.err(p, f"Size {a} became {b!r}")
            return None
        if type(a) is not type(b):
            return self.err(p, f"{type(a).__name__} became {type(b).__name__}: {b!r:.80}")
        if isinstance(a, float):
            if struct.pack("<d", a) != struct.pack("<d", b):
                self.err(p, f"{a!r} became {b!r}")
            return None
        if isinstance(a, complex):
            if struct.pack("<dd", a.real, a.imag) != struct.pack("<dd", b.real, b.imag):
                self.err(p, f"{a!r} became {b!r}")
            return None
        if isinstance(a, dict):
            ka, kb = list(a.keys()), list(b.keys())
            if ka != kb and (self.order or sorted(ka, key=repr) != sorted(kb, key=repr)):
                return self.err(p, f"keys {list(a)!r:.200} became {list(b)!r:.200}")
            for k in a:
                if type(k) is not type(next(x for x in b if x == k)):
                    self.err(p, f"key {k!r} changed type")
                self.walk(a[k], b[k], f"{p}.{k}" if p else str(k))
            ma, mb = getattr(a, "_metadata", None), getattr(b, "_metadata", None)
            if ma is not None or mb is not None:
                if ma != mb:
                    self.err(p, f"_metadata {ma!r} became {mb!r}")
            return None
        if isinstance(a, (list, tuple)):
            if len(a) != len(b):
                return self.err(p, f"length {len(a)} became {len(b)}")
            for i, (x, y) in enumerate(zip(a, b)):
                self.walk(x, y, f"{p}.{i}" if p else str(i))
            return None
        if a != b:
            self.err(p, f"{a!r:.80} became {b!r:.80}")
        return None

    def tensor(self, a, b, p):
        self.pairs.append((p, a, b))
        na, nb = dtype_name(a), dtype_name(b)
        want = MAPPED.get(na, na) if self.mapped else na
        if nb != want:
            return self.err(p, f"dtype {na} became {nb}")
        if tuple(a.shape) != tuple(b.shape):
            return self.err(p, f"shape {tuple(a.shape)} became {tuple(b.shape)}")
        _, ha = host(a)
        _, hb = host(b)
        if na != nb:  # (int64 -> int32, float64 -> float32: the values are drawn to fit)
            ha = ha.astype(hb.dtype)
        if ha.shape != hb.shape or not np.array_equal(bits(ha), bits(hb)):
            diff = np.flatnonzero(bits(ha).reshape(-1) != bits(hb).reshape(-1))
            return self.err(
                p,
                f"{na} values differ at {len(diff)} of {ha.size}: first at {diff[:3]}: "
                f"{ha.reshape(-1)[diff[:3]]} became {hb.reshape(-1)[diff[:3]]}",
            )
        if self.params:
            if is_param(a) != is_param(b):
                self.err(p, f"Parameter {is_param(a)} became {is_param(b)}")
            if bool(a.requires_grad) != bool(b.requires_grad):
                self.err(p, f"requires_grad {a.requires_grad} became {b.requires_grad}")
        if self.strides and a.numel() > 0 and tuple(a.stride()) != tuple(b.stride()):
            self.err(p, f"stride {tuple(a.stride())} became {tuple(b.stride())}")
        return None

    def check_sharing(self):
        pairs = [(p, a, b) for p, a, b in self.pairs if a.numel() > 0]
        for i in range(len(pairs)):
            for j in range(i + 1, len(pairs)):
                (pi, ai, bi), (pj, aj, bj) = pairs[i], pairs[j]
                if self.identity and (ai is aj) != (bi is bj):
                    self.err(pi, f"is {pj}: {ai is aj} became {bi is bj}")
                if not self.sharing:
                    continue
                if dtype_name(ai) != dtype_name(aj):
                    continue
                sa = storage_key(ai) == storage_key(aj)
                sb = storage_key(bi) == storage_key(bj)
                if sa != sb:
                    self.err(pi, f"shares a storage with {pj}: {sa} became {sb}")


# ---- the directions -------------------------------------------------------------------------
def _quiet(fn, *a, **k):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*a, **k)


def check_object(spec: Spec, tmp: str, out: list):
    obj_p = instantiate(spec, pr)
    obj_t = instantiate(spec, torch)

    # a: pyrite -> torch
    path = os.path.join(tmp, "a.pt")
    pr.save(obj_p, path)
    for how in ("weights_only", "full", "mmap"):
        kw = {"weights_only": how != "full"}
        if how == "mmap":
            kw["mmap"] = True
        try:
            got = _quiet(torch.load, path, **kw)
        except Exception as e:  # noqa: BLE001
            out.append(f"a/{how}: torch.load raised {type(e).__name__}: {str(e)[:300]}")
            continue
        out += [f"a/{how}: {e}" for e in Compare().run(obj_p, got)]
    buf = io.BytesIO()
    pr.save(obj_p, buf)
    raw = buf.getvalue()
    try:
        got = _quiet(torch.load, io.BytesIO(raw), weights_only=True)
        out += [f"a/bytesio: {e}" for e in Compare().run(obj_p, got)]
    except Exception as e:  # noqa: BLE001
        out.append(f"a/bytesio: torch.load raised {type(e).__name__}: {str(e)[:300]}")

    # b: torch -> pyrite (and back to torch through pyrite's file)
    for fmt in ("zip", "legacy"):
        tpath = os.path.join(tmp, f"b_{fmt}.pt")
        _quiet(torch.save, obj_t, tpath, _use_new_zipfile_serialization=fmt == "zip")
        try:  # (torch refuses some of its own files: b"" pickles as the global `bytes`)
            _quiet(torch.load, tpath, weights_only=True)
            torch_refuses = False
        except pickle.UnpicklingError:
            torch_refuses = True
        for wo in (True, False):
            try:
                got = pr.load(tpath, weights_only=wo)
            except Exception as e:  # noqa: BLE001
                if wo and torch_refuses and isinstance(e, pickle.UnpicklingError):
                    continue
                out.append(f"b/{fmt}/wo={wo}: pr.load raised {type(e).__name__}: {str(e)[:300]}")
                continue
            if wo and torch_refuses:
                out.append(f"b/{fmt}/wo=True: torch refuses its own file, pyrite loads it")
            out += [f"b/{fmt}/wo={wo}: {e}" for e in Compare(mapped=True).run(obj_t, got)]
        again = os.path.join(tmp, f"b_{fmt}_again.pt")
        try:
            pr.save(got, again)
            back = _quiet(torch.load, again, weights_only=True)
            out += [f"b/{fmt}/again: {e}" for e in Compare(mapped=True).run(obj_t, back)]
        except Exception as e:  # noqa: BLE001
            out.append(f"b/{fmt}/again: raised {type(e).__name__}: {str(e)[:300]}")

    # c: pyrite -> pyrite
    for name, where in (("zip", path), ("bytesio", io.BytesIO(raw))):
        got = pr.load(where)
        out += [f"c/{name}: {e}" for e in Compare().run(obj_p, got)]
    spath = os.path.join(tmp, "c.safetensors")
    pr.save(obj_p, spath)
    got = pr.load(spath)
    cmp = Compare(strides=False, sharing=False, identity=False)
    out += [f"c/safetensors: {e}" for e in cmp.run(obj_p, got)]
    for p, a, b in cmp.pairs:  # (the same tensor twice: still one)
        for q, a2, b2 in cmp.pairs:
            if a is a2 and b is not b2:
                out.append(f"c/safetensors: {p} and {q} were one tensor, loaded as two")

    if spec.flat:
        check_flat(obj_p, obj_t, tmp, out)
    check_damage(spec, raw, tmp, out)


def check_flat(obj_p, obj_t, tmp, out):
    # d: safetensors.torch.save_file -> pr.load
    path = os.path.join(tmp, "d_torch.safetensors")
    clones = {k: v.detach().contiguous().clone() for k, v in obj_t.items()}
    safetensors.torch.save_file(clones, path)
    try:
        got = pr.load(path)
        # (a safetensors file has no key order: save_file sorts its entries, load_file too)
        cmp = Compare(
            mapped=True, strides=False, sharing=False, identity=False, params=False, order=False
        )
        out += [f"d/save_file: {e}" for e in cmp.run(clones, got)]
    except Exception as e:  # noqa: BLE001
        out.append(f"d/save_file: pr.load raised {type(e).__name__}: {str(e)[:300]}")
    # pyrite's safetensors -> safetensors.torch.load_file (tied keys: the first only)
    path = os.path.join(tmp, "d_pyrite.safetensors")
    pr.save(obj_p, path)
    try:
        got = safetensors.torch.load_file(path)
    except Exception as e:  # noqa: BLE001
        return out.append(f"d/load_file: raised {type(e).__name__}: {str(e)[:300]}")
    seen, want = {}, {}
    for k, v in obj_p.items():
        ident = (id(v._storage), v._offset, tuple(v.shape), v._strides, v.dtype)
        if ident not in seen:
            seen[ident] = k
            want[k] = v
    cmp = Compare(strides=False, sharing=False, identity=False, params=False)
    if sorted(got) != sorted(want):
        out.append(f"d/load_file: keys {sorted(want)} became {sorted(got)}")
    else:
        out += [f"d/load_file: {e}" for e in cmp.run(want, {k: got[k] for k in want})]


def _is_clear(e, target) -> str | None:
    """None if `e` is a clear error about `target`, else what is wrong with it."""
    msg = str(e)
    if ".tmp" in msg and os.path.basename(target) + ".tmp" not in msg:
        return f"names pyrite's temporary file: {type(e).__name__}: {msg[:200]}"
    if isinstance(e, PyriteError):
        return None
    if isinstance(e, OSError) or isinstance(e, RuntimeError):
        if "pyrite" in msg or target in msg or os.path.dirname(target) in msg:
            return None
        return f"{type(e).__name__} not naming the target: {msg[:200]}"
    if isinstance(e, (pickle.PicklingError, TypeError, AttributeError)) and "pickle" in msg:
        return None
    return f"raw {type(e).__name__}: {msg[:200]}"


def _save_refused(obj, target, label, out, what="saved"):
    """pr.save(obj, target) must raise a clear error about target: else a line in out."""
    try:
        pr.save(obj, target)
        out.append(f"f/{label}: {what}")
    except Exception as e:  # noqa: BLE001
        bad = _is_clear(e, target)
        if bad:
            out.append(f"f/{label}: {bad}")


def check_damage(spec, raw, tmp, out):
    """f: failed saves leave nothing behind (or the previous file); damaged files give a pyrite
    error on load (or load: a flipped byte in tensor data)."""
    rng = np.random.default_rng(spec.seed + 10_000)
    small = {"w": pr.ones(3), "n": 1}
    # a missing folder
    target = os.path.join(tmp, "missing", "x.pt")
    _save_refused(small, target, "missing folder", out)
    if os.path.exists(os.path.dirname(target)):
        out.append("f/missing folder: created it")
    # a read-only place (as root, chmod does not stop writes: /sys is mounted read-only)
    for target in ("/sys/pyrite_fuzz.pt", "/proc/pyrite_fuzz.safetensors"):
        _save_refused(small, target, f"read-only {target}", out)
    # over a folder
    target = os.path.join(tmp, "folder.pt")
    os.makedirs(target, exist_ok=True)
    _save_refused(small, target, "over a folder", out)
    if not os.path.isdir(target) or os.listdir(target):
        out.append("f/over a folder: the folder changed")
    # an unpicklable object over a previous file, as a path and as a file object
    before = set(os.listdir(tmp))
    for name in ("prev.pt", "prev.safetensors"):
        target = os.path.join(tmp, name)
        with open(target, "wb") as fh:
            fh.write(b"previous")
        for bad_obj in (
            {"w": pr.ones(2), "f": lambda: 0},
            [threading.Lock()],
            {"g": (x for x in [])},
        ):
            _save_refused(bad_obj, target, f"unpicklable {name}", out, f"saved {bad_obj!r:.60}")
            with open(target, "rb") as fh:
                if fh.read() != b"previous":
                    out.append(f"f/unpicklable {name}: the previous file changed")
    after = set(os.listdir(tmp))
    if after - before - {"prev.pt", "prev.safetensors"}:
        out.append(f"f/unpicklable: left {sorted(after - before)}")
    # damaged files: pyrite's own, and torch's (zip, legacy)
    files = {"pyrite": raw}
    bufs = {}
    obj_t = {"w": torch.arange(40, dtype=torch.float32).reshape(5, 8)[:, 1:], "n": [1, "x"]}
    for fmt in ("zip", "legacy"):
        bufs[fmt] = io.BytesIO()
        torch.save(obj_t, bufs[fmt], _use_new_zipfile_serialization=fmt == "zip")
        files[fmt] = bufs[fmt].getvalue()
    files["safetensors"] = safetensors.torch.save({"w": torch.ones(4, 3)})
    target = os.path.join(tmp, "damaged.pt")
    for kind, data in files.items():
        n = len(data)
        cuts = [data[: int(c)] for c in rng.integers(1, n, 4)]
        flips = []
        for pos in rng.integers(0, n, 8):
            d = bytearray(data)
            d[pos] ^= int(rng.integers(1, 256))
            flips.append((int(pos), bytes(d)))
        for what, d in [("cut", c) for c in cuts] + [(f"flip@{p}", d) for p, d in flips]:
            with open(target, "wb") as fh:
                fh.write(d)
            try:
                _quiet(pr.load, target)
            except PyriteError as e:
                if "damaged.pt" not in str(e):
                    out.append(f"f/{kind}/{what}: error not naming the file: {str(e)[:200]}")
            except Exception as e:  # noqa: BLE001
                out.append(f"f/{kind}/{what} ({len(d)} of {n} bytes): raw {type(e).__name__}: "
                           f"{str(e)[:200]}")  # fmt: skip
            else:
                if what == "cut":
                    out.append(f"f/{kind}/{what}: a truncated file ({len(d)} of {n}) loaded")


def check_resume(spec: Spec, tmp: str, out: list):
    """e: torch module + optimizer -> pyrite and on one step; pyrite's -> torch and on one."""
    kind, cfg, opt_kind, fmt = spec.resume
    cfg += kind == "batchnorm1d" and cfg % 2  # (affine: an optimizer needs parameters)
    tm, topt = trained(torch, kind, cfg, opt_kind)
    path = os.path.join(tmp, "e.pt")
    ckpt = {"model": tm.state_dict(), "optimizer": topt.state_dict(), "epoch": 3}
    _quiet(torch.save, ckpt, path, _use_new_zipfile_serialization=fmt == "zip")
    got = pr.load(path)
    out += [f"e/load: {e}" for e in Compare(mapped=True).run(ckpt, got)]
    pm, _ = make_module(pr, kind, cfg, values=1)  # (other values: the load must set them all)
    pm.load_state_dict(got["model"], strict=True)
    popt = make_optimizer(pr, opt_kind, pm.parameters())
    popt.load_state_dict(got["optimizer"])
    cmp = Compare(mapped=True, sharing=False, identity=False, params=False)
    out += [f"e/state: {e}" for e in cmp.run(dict(tm.state_dict()), dict(pm.state_dict()))]
    _step_both(tm, topt, pm, popt, kind, cfg, out, "e/torch->pyrite step")
    # pyrite -> torch
    path2 = os.path.join(tmp, "e_back.pt")
    pr.save({"model": pm.state_dict(), "optimizer": popt.state_dict()}, path2)
    back = torch.load(path2, weights_only=True)
    tm2, _ = make_module(torch, kind, cfg, values=2)
    tm2.load_state_dict(back["model"], strict=True)
    topt2 = make_optimizer(torch, opt_kind, tm2.parameters())
    topt2.load_state_dict(back["optimizer"])
    cmp = Compare(mapped=False, strides=False, sharing=False, identity=False, params=False)
    psd = {k: v for k, v in pm.state_dict().items()}
    tsd = {k: (v.int() if v.dtype == torch.int64 else v) for k, v in tm2.state_dict().items()}
    out += [f"e/back state: {e}" for e in cmp.run(psd, tsd)]
    _step_both(tm2, topt2, pm, popt, kind, cfg, out, "e/pyrite->torch step")


def _step_both(tm, topt, pm, popt, kind, cfg, out, what):
    _, x = make_module(torch, kind, cfg)
    tm.train()
    pm.train()
    topt.zero_grad()
    o = forward(tm, kind, x, torch)
    if any(p.requires_grad for p in tm.parameters()):
        (o * o).mean().backward()
    grads = [None if p.grad is None else p.grad.clone() for p in tm.parameters()]
    topt.step()
    with pr.no_grad():
        forward(pm, kind, x, pr)  # (BatchNorm's running stats move as torch's did)
    for p, g in zip(pm.parameters(), grads):
        p.grad = None if g is None else pr.tensor(g.numpy())
    popt.step()
    for (name, tp), pp in zip(tm.named_parameters(), pm.parameters()):
        t = tp.detach().numpy()
        g = pp.detach().numpy()
        tol = 16 * F32_U * max(1.0, float(np.abs(t).max(initial=0)))
        if t.shape != g.shape or not np.allclose(g, t, rtol=0, atol=tol):
            err = np.abs(g - t).max() if t.shape == g.shape else "shape"
            out.append(f"{what}: {name} differs by {err} (tol {tol:.2g})")
    for (name, tb), pb in zip(tm.named_buffers(), pm.buffers()):
        t, g = tb.detach().double().numpy(), pb.detach().double().numpy()
        tol = 16 * F32_U * max(1.0, float(np.abs(t).max(initial=0)))
        if t.shape != g.shape or not np.allclose(g, t, rtol=0, atol=tol):
            out.append(f"{what}: buffer {name} differs")


# ---- driving --------------------------------------------------------------------------------
def check(spec: Spec) -> tuple[str, str]:
    tmp = tempfile.mkdtemp(prefix="fuzz_ckpt_")
    out: list[str] = []
    try:
        if spec.kind == "resume":
            check_resume(spec, tmp, out)
        else:
            check_object(spec, tmp, out)
    except Exception as e:  # noqa: BLE001 (a raise where none was expected: a finding)
        import traceback

        tb = traceback.extract_tb(e.__traceback__)[-1]
        out.append(f"raised {type(e).__name__} at {tb.filename}:{tb.lineno}: {str(e)[:300]}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if out:
        return "fail", "; ".join(dict.fromkeys(out))
    return "ok", ""


def describe(spec: Spec) -> str:
    lines = [f"# seed {spec.seed}: {spec.kind}"]
    if spec.kind == "resume":
        lines.append(f"resume {spec.resume}")
        return "\n".join(lines)
    for i, (name, arr) in enumerate(spec.bases):
        lines.append(f"base{i}: {name} {arr.shape}")
    for i, (b, ops, param, grad) in enumerate(spec.tensors):
        lines.append(f"t{i} = base{b} {ops} param={param} grad={grad}")
    lines.append(f"tree: {spec.tree!r:.2000}")
    return "\n".join(lines)


def main(argv=None):
    return fuzz_driver.run(__doc__, lambda seed: Gen(seed).build(), check, describe, argv)


if __name__ == "__main__":
    sys.exit(main())
