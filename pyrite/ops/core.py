"""What every op needs: allocating outputs, broadcasting, coalescing dims, running the strided map.

This is where `kernels/` (WGSL text) and `backend/` (the device) meet.
"""

from __future__ import annotations

import math
import os
import struct
import sys

from .. import backend
from .. import dtypes as D
from ..backend.pool import size_class
from ..errors import ShapeError
from ..kernels.common import WG, grid_for
from ..kernels.elementwise import map_kernel, map_words, vec4_fits
from ..tensor import Tensor, contiguous_strides
from . import ranges
from .overlap import check_overlap, check_writable
from .ranges import exact_minmax, known_bounds, note_indices  # noqa: F401 - (their home was here)

# (`pyrite.tensor` names the function once pyrite is imported: reach the module itself)
_tensor_module = sys.modules[Tensor.__module__]

# PYRITE_POISON=1 (or PYRITE_DEBUG>=1 with PYRITE_POISON unset): fill every kernel output with NaN
# bits before the kernel runs, so an element nobody wrote fails a parity test instead of reading a
# stale value from a recycled buffer.
POISON = os.environ.get("PYRITE_POISON", "0") not in ("", "0")
_tensor_module.CHECK_SMALL_INT_RANGE = POISON


# Elements per invocation in the strided map (each WG apart, so accesses stay coalesced).
# H200 (2026-11-29, `pyrite bench`, 256 MiB copy through Dawn): 1 → 1.77 TB/s, 4 → 2.25 TB/s
# (torch CUDA 3.7). lavapipe (2 cores, 16 MiB copy_, best of 2): 1 → 1.38 GB/s, 4 → 1.21,
# 8 → 2.52, 16 → 2.68 but erratic (1.29), 32 → 1.43. PYRITE_EW_PER_THREAD overrides.
_PER_THREAD_ENV = os.environ.get("PYRITE_EW_PER_THREAD")


def per_thread() -> int:
    if _PER_THREAD_ENV:
        return int(_PER_THREAD_ENV)
    return 8 if backend.current().adapter_type == "CPU" else 4


# Kernels plan their loops against the device's loop budget (backend/quirks.py): a budget-limited
# driver (lavapipe) stops an invocation after that many iterations of all its loops together and
# the kernel silently computes a wrong result. Planners keep their main loop under this limit,
# which leaves LOOP_MARGIN iterations for the small fixed loops (tree merges, per-thread
# unrolled steps) a kernel runs besides it. The subgroup reductions' merge of one slot a subgroup
# (kernels/rowops._sg_reduce, reduce._sg_tree, matmul.lane_sum) is one of them: at most
# lanes / 4 + 1 iterations (257 for the 1,024-lane wide reduction; on lavapipe's 8-lane
# subgroups 33 for a row of 256 lanes). Where there is no budget the limit is effectively
# unbounded. PYRITE_LOOP_BUDGET=N makes any device behave as a budget-limited one (tests).
LOOP_MARGIN = 4096
UNBOUNDED = 1 << 62


def constants_getter(*parts):
    """One function reading, each call, the module constants a plan cache's plans depend on (as
    part of its key: tests and A/B runs change them): for each (module, extra names) of `parts`,
    the module's upper-case bool, int, float or None attributes (not PLANS_MAX, a cache's own
    bound) and the extra names (rules tests replace, say), by operator.attrgetter (~1 µs)."""
    from operator import attrgetter

    getters = []
    for m, extra in parts:
        names = [n for n, v in vars(m).items() if n.isupper() and n[0] != "_"
                 and n != "PLANS_MAX" and isinstance(v, (bool, int, float, type(None)))]  # fmt: skip
        names += list(extra)
        if names:
            getters.append((attrgetter(*names), m))
    return lambda: tuple([g(m) for g, m in getters])


class PlanCache(dict):
    """Plans kept by key (an op's kernel, info words and grid for an operand layout), emptied
    by for_device when the current device changes and by keep when full. `constants(dev)` is
    the part of a key every plan shares: the module constants of constants_getter(*parts())
    (`parts` a function, called on first use, so modules that import each other can name each
    other)."""

    def __init__(self, parts=None):
        super().__init__()
        self.parts, self.device, self.getter = parts, None, None

    def for_device(self, dev):
        """Empty the cache if `dev` is not the device its plans were made for."""
        if self.device is not dev:
            self.clear()
            self.device = dev

    def constants(self, dev):
        self.for_device(dev)
        if self.getter is None:
            self.getter = constants_getter(*self.parts())
        return self.getter()

    def keep(self, key, plan, limit: int):
        """Keep `plan` under `key`, emptying the cache first when it holds `limit` plans."""
        if len(self) >= limit:
            self.clear()
        self[key] = plan


def max_loop_iterations() -> int:
    """How many iterations one invocation's main loop may run on the current device."""
    budget = backend.current().loop_budget
    if budget is None:
        return UNBOUNDED
    return max(budget - LOOP_MARGIN, budget // 2)


def set_poison(on: bool):
    global POISON
    POISON = bool(on)
    _tensor_module.CHECK_SMALL_INT_RANGE = POISON


def _storage_nbytes(n: int, dtype) -> int:
    """Device bytes of n elements: whole u32 words (bf16 packs two a word; the small ints and
    bool take a word each: dtype.storage_bytes)."""
    return max((n * dtype.storage_bytes + 3) & ~3, 4)


# (shape, dtype) -> (numel, device bytes, logical bytes, contiguous strides, the bytes' pool size
# class): what empty() derives from its arguments, computed once per shape (~0.4 µs of every
# op's output)
_layouts: dict = {}


def _layout(shape, dtype):
    n = math.prod(shape)
    nbytes = _storage_nbytes(n, dtype)
    lay = (n, nbytes, n * dtype.itemsize, contiguous_strides(shape), size_class(nbytes))
    if len(_layouts) > 4096:
        _layouts.clear()
    _layouts[shape, dtype] = lay
    return lay


def empty(shape, dtype, mappable=False) -> Tensor:
    """A new contiguous tensor; its contents are whatever the recycled buffer held. `mappable`:
    a small result the host is likely to read, in a buffer it can map where the device has
    them (backend/device.py MAPPABLE)."""
    shape = tuple(shape)
    lay = _layouts.get((shape, dtype)) or _layout(shape, dtype)
    dev = backend.current()
    if dtype is D.float16:
        backend.require_f16(dev)
    return empty_laid(dev, shape, dtype, lay, mappable)


def empty_laid(dev, shape: tuple, dtype, lay, mappable=False) -> Tensor:
    """empty() on `dev` with its layout `lay` already looked up (_layouts' entry: elements,
    bytes, logical bytes, strides) and the dtype already allowed there (ops/bound.py's plans
    keep both)."""
    storage = dev.pool.allocate(lay[1], False, mappable, lay[4])
    storage.logical_nbytes = lay[2]
    t = Tensor._make(storage, shape, lay[3], 0, dtype)
    if POISON and lay[0]:
        _poison(t)
    return t


def empty_out(shape, dtype) -> Tensor:
    return empty(shape, dtype)


def upload(host, dtype, shape=None) -> Tensor:
    """A new contiguous tensor holding a numpy array already in `dtype`'s storage layout
    (`dtype.np`: bool as uint32, the small ints as int32, bfloat16 as its uint16 bits). Never
    poisoned: the queue writes it before pending work."""
    import numpy as np

    shape = tuple(np.shape(host) if shape is None else shape)
    host = np.ascontiguousarray(host)  # note: makes a 0-d array 1-d, hence `shape` first
    dev = backend.current()
    if dtype is D.float16:
        backend.require_f16(dev)
    storage = dev.upload_new(host.reshape(-1).view(np.uint8) if host.size else b"")
    storage.logical_nbytes = math.prod(shape) * dtype.itemsize
    t = Tensor._make(storage, shape, contiguous_strides(shape), 0, dtype)
    if dtype.kind == "i" and host.size and host.dtype == np.int32:
        note_bounds(t, int(host.min()), int(host.max()), exact=True)
    return t


# ---- value bounds known without a readback (ops/ranges.py) ----------------------------------
def note_bounds(t, lo: int, hi: int, exact: bool = False) -> None:
    """Record that every element of `t`'s storage lies in [lo, hi] by construction (the same
    range whatever the inputs: a replay under pr.compile keeps it); `exact`: lo and hi are the
    min and max of `t`'s elements, which are the whole storage (a fresh contiguous t)."""
    ranges.note(t, lo, hi, exact)


# Host bytes a chunked upload converts and writes at a time (upload_chunks): bounds the host
# memory a large checkpoint tensor needs beside its source bytes (a memory map, say).
UPLOAD_CHUNK_BYTES = 64 << 20


def upload_chunks(chunks, dtype, n: int) -> Tensor:
    """A new contiguous 1-d tensor of n elements of `dtype`, written from an iterable of numpy
    arrays already in dtype's storage layout (`dtype.np`), in order, each written and forgotten
    before the next is asked for. The device is synchronised between chunks so the driver's
    staging copies do not pile up either: host memory holds about one chunk at a time."""
    import numpy as np

    dev = backend.current()
    if dtype is D.float16:
        backend.require_f16(dev)
    storage = dev.pool.allocate(_storage_nbytes(n, dtype), upload=True)
    storage.logical_nbytes = n * dtype.itemsize
    at = 0
    for chunk in chunks:
        raw = np.ascontiguousarray(chunk).reshape(-1).view(np.uint8)
        if not raw.size:
            continue
        if at % 4:
            raise ValueError("pyrite: internal: upload chunks must be whole words but the last")
        if at:  # the previous chunk's staging copy is consumed before this one is made
            dev.synchronize()
        dev.upload(storage, raw, byte_offset=at)
        at += raw.size
    return Tensor._make(storage, (n,), (1,), 0, dtype)


def _poison(t: Tensor):
    src = map_kernel("s0", (), (t.dtype.storage, "f32", "c"), 1, ("f32",))
    nan_bits = 0x7FC00000  # a quiet NaN
    if t.dtype.kind == "i":
        # 0xDEADBEEF: not a value a correct kernel would leave (for the small ints: outside
        # their range, which Tensor.numpy() checks while poisoning is on)
        nan_bits = -559038737
        src = map_kernel("s0", (), ("i32", "i32", "c"), 1, ("i32",))
    elif t.dtype.is_bool:
        nan_bits = 7
        src = map_kernel("s0", (), ("u32", "i32", "c"), 1, ("i32",))
    n = t.numel()
    units = map_words(n, t.dtype.storage, "c")
    dev = backend.current()
    if dev._tape is not None and dev._tape.recording:  # (a fill: it reads nothing)
        dev._tape.map_next("s0", (), (), t, "f32", (), ())
    dev.dispatch(src, (t._storage.buffer,), (n, 0, nan_bits), grid_for(units))


# ---- shapes --------------------------------------------------------------------------------
_bcast_cache: dict = {}


def broadcast_shapes(*shapes) -> tuple:
    key = shapes
    hit = _bcast_cache.get(key)
    if hit is not None:
        return hit
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for s in shapes:
        for i, d in enumerate(s):
            j = ndim - len(s) + i
            if d == out[j] or d == 1:
                continue
            if out[j] == 1:
                out[j] = d
            else:
                raise ShapeError(
                    f"pyrite: shapes {' and '.join(str(tuple(x)) for x in shapes)} "
                    f"do not broadcast (dimension {j - ndim}: {out[j]} vs {d})"
                )
    res = tuple(out)
    if len(_bcast_cache) > 4096:
        _bcast_cache.clear()
    _bcast_cache[key] = res
    return res


def broadcast_strides(t: Tensor, shape) -> tuple:
    """Strides that read `t` as if expanded to `shape` (0 where broadcast)."""
    nd = len(shape)
    lead = nd - t.ndim
    out = [0] * nd
    for i, (d, s) in enumerate(zip(t._shape, t._strides)):
        out[lead + i] = 0 if d == 1 else s
    return tuple(out)


_coalesce_cache: dict = {}


def coalesce(shape, strides_list):
    """Merge dims that every operand walks contiguously; drop size-1 dims.

    Returns (shape, [strides per operand]) with the smallest rank that indexes the same elements.
    """
    key = (shape, *strides_list)
    hit = _coalesce_cache.get(key)
    if hit is not None:
        return hit
    dims = [i for i, d in enumerate(shape) if d != 1]
    new_shape: list[int] = []
    new_strides: list[list[int]] = [[] for _ in strides_list]
    for i in dims:
        d = shape[i]
        if new_shape and all(ns[-1] == st[i] * d for ns, st in zip(new_strides, strides_list)):
            new_shape[-1] *= d
            for ns, st in zip(new_strides, strides_list):
                ns[-1] = st[i]
        else:
            new_shape.append(d)
            for ns, st in zip(new_strides, strides_list):
                ns.append(st[i])
    res = (tuple(new_shape), [tuple(s) for s in new_strides])
    if len(_coalesce_cache) > 8192:
        _coalesce_cache.clear()
    _coalesce_cache[key] = res
    return res


def _pattern(shape, strides):
    if not shape:
        return "c"
    if all(s == 0 for s in strides):
        return "0"
    if strides == contiguous_strides(shape):
        return "c"
    return "s"


_F32 = struct.Struct("<f")
_I32 = struct.Struct("<i")


def f32_bits(x: float) -> int:
    """The float32 bits (as an i32) of Python float `x`, rounded to nearest; a value past
    float32's range is ±inf, as torch casts a scalar operand (`x + 1e39` is inf)."""
    try:
        return _I32.unpack(_F32.pack(x))[0]
    except OverflowError:  # (struct refuses what rounds past FLT_MAX; float32 makes it inf)
        return -8388608 if x < 0 else 2139095040  # 0xFF800000, 0x7F800000


def scalar_word(x, ctype: str) -> int:
    if ctype == "f32":
        return f32_bits(float(x))
    return int(x)


# ---- the strided map -----------------------------------------------------------------------
# Sizes from info words, not baked into the WGSL (DESIGN.md asks for the measurement; `pyrite
# bench --only baked` repeats it). One contiguous f32 add, the same kernel text with the words
# replaced by constants:
#   H200, Dawn:  16,777,216 elements 106.5 us (info) vs 78.9 us (baked), 1.35x;
#                65,536: 52.6 vs 32.6 us (the info figure includes pyrite's per-op Python).
#   H200, wgpu:  99.2 vs 80.6 us (1.23x); 41.3 vs 16.2 us.
#   lavapipe:    16.7M: 1.18-1.57x across runs.
# A baked pipeline costs 9-19 ms to build on the H200 (~100 of those large adds), and eager
# code sees many shapes, so eager maps read info words; a compiled graph (pr.compile, a later
# issue) knows its shapes once and should bake them.
# Plans: everything about a map call that depends only on shapes, strides, dtypes and the
# expression — the kernel, the static info words, the grid — keyed on exactly those. A hit
# leaves only the offsets and scalars to fill in per call (the eager per-op budget is ~20 µs).
_plans = PlanCache()
# where run_map appends each map it dispatches (expr, inputs, ctypes, out, out ctype, scalars,
# their ctypes) while ops/bound.py learns a call; None otherwise
_capture: list | None = None


def run_map(expr: str, inputs, in_ctypes, out: Tensor, out_ctype: str, scalars=(), s_ctypes=()):
    """out[...] = expr(inputs broadcast to out.shape, scalars), for `out` contiguous or a view.

    An input sharing out's storage is read through the output binding when it is exactly out's
    view (an in-place op); a partial overlap is refused as torch refuses it (ops/overlap.py);
    any other (a strided or expanded input, torch's TOO_HARD) is read from a copy.
    """
    ostore = out._storage
    if type(s_ctypes) is not tuple:
        s_ctypes = tuple(s_ctypes)
    key = [expr, out_ctype, out.dtype, out._shape, out._strides, s_ctypes]
    odd = out._offset & 3  # (every offset a multiple of 4: the vec4 map may serve)
    for t, ct in zip(inputs, in_ctypes):
        if t._storage is ostore:
            if not _same_view(t, out):
                check_writable(out)  # (torch's order: the written-to tensor's own check first)
                check_overlap(out, inputs)
                inputs = [
                    x if x._storage is not ostore or _same_view(x, out) else contiguous_copy(x)
                    for x in inputs
                ]
                return run_map(expr, inputs, in_ctypes, out, out_ctype, scalars, s_ctypes)
            key.append(None)
        key.append(t.dtype)
        key.append(ct)
        key.append(t._shape)
        key.append(t._strides)
        odd |= t._offset & 3
    key.append(odd == 0)
    cmd = _map_command(tuple(key), expr, inputs, in_ctypes, out, out_ctype, scalars, s_ctypes)
    if cmd is None:
        return out
    dev = backend.current()
    tape = dev._tape
    if tape is not None and tape.recording:  # (what compile/fusion.py may fuse)
        tape.map_next(expr, inputs, in_ctypes, out, out_ctype, scalars, s_ctypes)
    if _capture is not None:  # (ops/bound.py learning what a call ran)
        _capture.append((expr, inputs, in_ctypes, out, out_ctype, scalars, s_ctypes))
    dev.dispatch(*cmd)
    if out.dtype.is_floating_point and _untracked(inputs):
        _mark_untracked(out, expr)
    return out


def _map_key(expr, inputs, in_ctypes, out, out_ctype, s_ctypes) -> tuple:
    """The plan key of a map whose inputs overlap `out` at most as exactly its view."""
    key = [expr, out_ctype, out.dtype, out._shape, out._strides, tuple(s_ctypes)]
    odd = out._offset & 3
    for t, ct in zip(inputs, in_ctypes):
        if t._storage is out._storage:
            key.append(None)
        key += [t.dtype, ct, t._shape, t._strides]
        odd |= t._offset & 3
    key.append(odd == 0)
    return tuple(key)


def map_command(expr, inputs, in_ctypes, out, out_ctype, scalars=(), s_ctypes=()):
    """(kernel, buffers, info words, grid) of run_map's dispatch, or None for an empty output;
    no input may overlap `out` except as exactly its view (compile/fusion.py builds fused maps
    through here)."""
    key = _map_key(expr, inputs, in_ctypes, out, out_ctype, s_ctypes)
    return _map_command(key, expr, inputs, in_ctypes, out, out_ctype, scalars, tuple(s_ctypes))


def map_plan(expr, inputs, in_ctypes, out, out_ctype, s_ctypes=()):
    """The kept plan (kernel, static info words, grid, elements, aliased inputs) of this map, or
    None where none is kept (ops/bound.py binds operator calls to it)."""
    return _plans.get(_map_key(expr, inputs, in_ctypes, out, out_ctype, s_ctypes))


def _map_command(key, expr, inputs, in_ctypes, out, out_ctype, scalars, s_ctypes):
    plan = _plans.get(key)
    if plan is None:
        plan = _plan(expr, inputs, in_ctypes, out, out_ctype, s_ctypes, key[-1])
        _plans.keep(key, plan, 8192)
    src, static, grid, n, aliased = plan
    if n == 0:
        return None
    info = [n, out._offset]
    bufs = []
    for t, al in zip(inputs, aliased):
        info.append(t._offset)
        if not al:
            bufs.append(t._storage.buffer)
    bufs.append(out._storage.buffer)
    if static:
        info.extend(static)
    if scalars:
        for x, ct in zip(scalars, s_ctypes):
            info.append(f32_bits(x) if ct == "f32" else int(x))
    return src, bufs, info, grid


def _untracked(inputs) -> bool:
    """Whether a kernel reads a tensor that requires grad while recording: an op without a
    backward rule (recorded ops run their kernels with recording off)."""
    for t in inputs:
        if t.requires_grad:
            from ..autograd import is_grad_enabled  # (only then: this runs for every map)

            return is_grad_enabled()
    return False


def _mark_untracked(out, what):
    """Give `out` a backward that raises, naming the kernel: never a silently missing gradient.
    (A public op's guard, autograd.wrap, replaces the kernel's name with the op's.)"""
    from .. import autograd

    op = autograd.guarded_op_name()
    label = op if op is not None else f"this op ({what[:60]})"
    autograd.record(f"<kernel {what[:60]}>", autograd._not_implemented(label), (), {}, out)


# Contiguous maps with n and every offset multiples of 4 take the vec4 kernel
# (kernels/elementwise.vec4_map_kernel); False: always the scalar one (A/B: scripts/rowmap_ab.py).
VEC4 = True


def _plan(expr, inputs, in_ctypes, out, out_ctype, s_ctypes, aligned=False):
    """The map's (kernel, static info words, grid, numel, aliased inputs); `aligned`: every
    offset a multiple of 4 (with n one too and vec4_fits' patterns: the vec4 kernel)."""
    if inputs:  # a fill (no inputs) may write one value to every alias, as torch's fill_
        check_writable(out)
    shape = out._shape
    n = math.prod(shape)
    ostore = out._storage
    strides_list = [out._strides]
    for t in inputs:
        strides_list.append(t._strides if t._shape == shape else broadcast_strides(t, shape))
    cshape, cstrides = coalesce(shape, strides_list)
    ins = []
    aliased = []
    for t, ct, st in zip(inputs, in_ctypes, cstrides[1:]):
        al = t._storage is ostore
        ins.append((t.dtype.storage, ct, _pattern(cshape, st), al))
        aliased.append(al)
    o_pat = _pattern(cshape, cstrides[0])
    static = []
    strided = o_pat == "s" or any(p == "s" for _, _, p, _ in ins)
    if strided:
        static.extend(cshape)
        if o_pat == "s":
            static.extend(cstrides[0])
        for (_, _, p, _), st in zip(ins, cstrides[1:]):
            if p == "s":
                static.extend(st)
    pt = per_thread()
    o = (out.dtype.storage, out_ctype, o_pat)
    vec4 = VEC4 and aligned and n % 4 == 0 and not strided and vec4_fits(tuple(ins), o)
    vec = 4 if vec4 else 1
    src = map_kernel(expr, tuple(ins), o, len(cshape) if strided else 1, tuple(s_ctypes), pt, vec)
    units = map_words(n, out.dtype.storage, o_pat) // vec
    return src, tuple(static), grid_for(units, WG * pt), n, tuple(aliased)


def _same_view(t: Tensor, out: Tensor) -> bool:
    """t is out's view (read through out's binding): its elements, and their type (an int32
    view of a float32 tensor copied into it is read from a copy: the binding is out's type)."""
    return (
        t._offset == out._offset
        and t._shape == out._shape
        and t._strides == out._strides
        and t.dtype is out.dtype
    )


def contiguous_copy(t: Tensor) -> Tensor:
    out = empty(t._shape, t.dtype)
    return keep_bounds(run_map("x0", (t,), (t.dtype.ctype,), out, t.dtype.ctype), t)


def keep_bounds(out: Tensor, *sources: Tensor) -> Tensor:
    """Note on a fresh `out` made of `sources`' elements (a copy, a cat) the range they are known
    to lie in, so an index tensor stays checkable without a readback after `ids.clone()` or
    `torch.cat([ids, next_token], -1)` (a decode loop's)."""
    return ranges.keep(out, *sources)
