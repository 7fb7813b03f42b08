"""Reductions (sum, mean, prod, max/min, amax/amin, argmax/argmin, var/std, logsumexp, all/any,
count_nonzero, norm, aminmax, nansum) and scans (cumsum, cumprod), with PyTorch's signatures.

Every reduction goes through `_reduce`: the reduced dims are split from the kept dims (a view,
no copy), each group is coalesced, and one kernel from kernels/reduce.py reduces each output
element's run, reading the input through its strides. Few outputs with long rows split each row
into chunks reduced in parallel to partial states, merged by a second dispatch (`_split_plan`).
f16 inputs are widened and every float accumulates in f32; integers and bools accumulate in i32
(PyTorch's int64 results are int32 here).
"""

from __future__ import annotations

import builtins
import math

import numpy as np

from .. import backend
from .. import dtypes as D
from ..errors import ArgumentError, DtypeError
from ..kernels.common import WG, fold_grid, grid_for
from ..kernels.reduce import (
    FUSED_EMPTY,
    FUSED_SPINS,
    SCAN_STAGED,
    fused_loop_iterations,
    fused_ok,
    lookback_clear_kernel,
    lookback_loop_iterations,
    reduce_kernel,
    reduce_loop_iterations,
    scan_kernel,
    scan_loop_iterations,
    scan_shared_bytes,
    state_words,
)
from ..tensor import Tensor, contiguous_strides
from . import range_rules
from .core import (
    PlanCache,
    coalesce,
    contiguous_copy,
    empty,
    f32_bits,
    max_loop_iterations,
    note_indices,
)
from .ranges import keep

# Serial (one invocation per output, no barriers) vs row (one workgroup per output, two
# barriers). Measured on lavapipe (llvmpipe 15, 256-bit, 2 cores), x.sum(1) of float32 randn,
# median of 5, ms including the readback (serial / row):
#   (16384, 16)  2.3 / 191     (4096, 64)   0.85 / 32     (1024, 256)   0.91 / 13
#   (256, 1024)  2.2 / 6.3     (64, 4096)   2.2 / 3.3     (8, 32768)    2.1 / 2.5
#   (1, 262144)  2.4 / 2.5     (16, 262144) 3.1 / 24      (1, 4194304)  4.2 / 15
# cumsum(x, 1): (16384, 16) 5.0 / 491, (1024, 256) 4.4 / 39, (1, 4194304) 57 / 157.
# (rows past 65,535 in the serial column were cut short by lavapipe's loop limit, see
# kernels/reduce.py, so those serial times are not valid.) On a CPU adapter a workgroup barrier
# costs more than the serial loop for every row length that kernel can run there, so CPU adapters
# take the serial kernel up to SERIAL_MAX_LEN_CPU elements a row and the row kernel beyond. On GPU adapters a single invocation walking a long
# row leaves the device idle; there rows of >= 512 elements (or >= 64 when there are fewer
# outputs than two workgroups' worth of invocations) take the workgroup kernel. The GPU numbers
# are the usual one-warp-per-row crossover, not measured here: time them on the H200
# (`pyrite bench`) before relying on them.
ROW_MIN_LEN = 512
FEW_OUTPUTS = 2 * WG
FEW_OUTPUTS_ROW_MIN_LEN = 64
SERIAL_MAX_LEN_CPU = 32768
# Whatever the heuristics pick, no invocation may loop past the device's loop budget
# (backend/quirks.py; lavapipe: 65,535 iterations in all): `_mode` moves a serial row past it to
# the row kernel, and `_split_plan` splits rows whose row kernel would pass it.
FORCE_MODE = None  # tests set "row" or "serial" to reach both kernels at small sizes

# Split (two-stage) reductions. One workgroup per output leaves the GPU idle when there are few
# outputs and long rows (x.sum() of 67,108,864 f32 ran 2.5 GB/s on the H200 through Dawn: one
# workgroup streamed 256 MB). Then each row is cut into P chunks of C elements (C a multiple of
# 256): a first dispatch reduces each (output, chunk) to a partial state S in a scratch buffer,
# a second merges each output's P states and applies the final step (kernels/reduce.py).
# GPU thresholds: split when fewer than SPLIT_MAX_OUTPUTS outputs have rows of >= SPLIT_MIN_LEN
# (both estimates, not measured on the H200), with P chosen so outputs·P ≈
# SPLIT_TARGET_WORKGROUPS (measured below; an H200 holds 132 SMs × 8 resident 256-wide
# workgroups ≈ 1,056 at once) and chunks of >= SPLIT_MIN_CHUNK elements (an estimate: >= 16
# loads an invocation, so the per-chunk tree merge stays a small part of the work).
SPLIT = True  # False: never split (to compare the paths)
FORCE_SPLIT = None  # tests set a chunk count P to reach the split kernels at small sizes
SPLIT_MAX_OUTPUTS = 1024
SPLIT_MIN_LEN = 16384
# measured (H200, 2026-12-03, scripts/rowmap_ab.py, vec4 loads): x.sum() of 67M f32 at P ~ 1024
# / 4096 / 16384: 3,411 / 3,096 / 2,220 GB/s (Dawn 3,524 / 3,283 / 2,493; torch CUDA 3,926;
# the scalar loads at 4096: 1,691), x.amax() 3,415 / 3,219 / 2,472
SPLIT_TARGET_WORKGROUPS = 1024
SPLIT_MIN_CHUNK = 4096
# lavapipe (2 shared cores, min of 11, ms with readback, x.sum(1)): row kernel / split with a
# serial partial stage (one invocation a chunk, no barriers) of C = 8192 / C = 16384:
#   (1, 40000) 0.73 / 0.83 / 0.95     (1, 300007) 3.0 / 3.0 / 3.0     (4, 262144) 6.0 / 2.7 / 2.9
#   (16, 65536) 2.3 / 4.7 / 3.5       (64, 65536) 11.9 / 10.2 / 10.0  (1, 4194304) 11.7 / 10.4 / 10.4
#   (1, 16777216): split only (row kernel past its loop limit), C = 4096 / 16384: 40 / 41
# (a row-mode partial stage was slower: 9.5 / 6.2 ms at (4, 262144) for C = 4096 / 16384). So on
# a CPU adapter a split is about even with the row kernel, better with a few long rows: rows past
# SERIAL_MAX_LEN_CPU with fewer than SPLIT_MAX_OUTPUTS_CPU outputs split, as must every row whose
# row kernel would pass the loop budget (past ~15.7M elements on lavapipe). Serial chunks of
# 8,192 keep each invocation's loop at 1/8 of lavapipe's ~65,535-iteration limit; the merge loops over P = L/8192 states (4,096 for a 128 MiB binding).
SPLIT_MAX_OUTPUTS_CPU = 16
SPLIT_CHUNK_CPU = 8192
# Wide rows: on a GPU, rows of SPLIT_MIN_LEN .. WIDE_MAX_LEN elements with few outputs (the
# split's territory) take one workgroup of WIDE_LANES invocations a row instead, each holding
# WIDE_ILP independent states so several loads are in flight: one dispatch, where the split's
# second dispatch and its barrier cost more than they save. H200, 2026-12-03, round trip of a
# sum and its read (`scripts/dispatch_probe.py --sum`, µs, wgpu-native / Dawn): one workgroup of
# 1,024 with four vec4 sums an invocation against pyrite's split + merge (the latter with the
# host's ~15 µs of issuing it): 98,304 f32 65.9 / 38.4 against 131.2 / 68.4; 262,144 51.5 / 42.8
# against 129.5 / 68.3; 1,048,576 66.9 / 64.0 against 86.2 / 69.7 (even: the split stays there).
# 256 invocations instead of 1,024 were slower past 98,304 (71.4 / 48.4 at 262,144).
WIDE = None  # None: the rule above; False: never (A/B); True: wherever the kernel applies (tests)
WIDE_LANES = 1024
WIDE_ILP = 4
WIDE_MAX_LEN = 262144
# One-pass splits (kernels/reduce.py's "fused" stage): on a GPU, where a split or the wide row
# kernel would run (few outputs, rows of >= SPLIT_MIN_LEN) and the state is all f32 (sums,
# means, extremes, norms, Welford), the split's partial units run as one dispatch whose last
# workgroup an output merges that output's states: the GPU's SMs share the row (the wide
# kernel is one workgroup, on one SM) without the second dispatch (a dependent dispatch costs
# ~6 µs of GPU time and the host's recording). P = min(ceil(FUSED_TARGET_WORKGROUPS /
# outputs), L / FUSED_MIN_CHUNK) chunks, at most FUSED_MAX_UNITS units (the persistent
# scratch's slots).
FUSED = None  # None: the rule above; False: never (A/B); True: wherever it applies (tests)
FUSED_TARGET_WORKGROUPS = 1024
FUSED_MIN_CHUNK = 2048
FUSED_MAX_UNITS = 1024
FUSED_WORDS = 6  # state words a slot holds (var_mean's n, m, q, k and its mean's sum a, c)
LAST_PATH = ""  # "serial" | "row" | "row wide" | "split P=<chunks> C=<chunk>" | "fused P= C=": the last kernel


def _cpu_adapter() -> bool:
    return backend.current().adapter_type == "CPU"


def _mode(n_out: int, length: int) -> str:
    if FORCE_MODE is not None and length <= SERIAL_MAX_LEN_CPU:
        mode = FORCE_MODE
    elif _cpu_adapter():
        mode = "serial" if length <= SERIAL_MAX_LEN_CPU else "row"
    elif length >= ROW_MIN_LEN or (n_out < FEW_OUTPUTS and length >= FEW_OUTPUTS_ROW_MIN_LEN):
        mode = "row"
    else:
        mode = "serial"
    if mode == "serial" and reduce_loop_iterations("serial", length) > max_loop_iterations():
        mode = "row"  # the serial loop would pass the device's loop budget
    return mode


def _wide(n_out: int, length: int, words: int) -> bool:
    """Whether rows of `length` with `n_out` outputs take the wide row kernel (see WIDE);
    `words`: i32 words of the reduction's state (its workgroup array holds WIDE_LANES)."""
    if WIDE is False or FORCE_MODE is not None or FORCE_SPLIT is not None:
        return False
    lim = backend.current().limits
    if (
        lim.get("max-compute-invocations-per-workgroup", 256) < WIDE_LANES
        or lim.get("max-compute-workgroup-size-x", 256) < WIDE_LANES
        or lim.get("max-compute-workgroup-storage-size", 16384) < 4 * words * WIDE_LANES
        or reduce_loop_iterations("row", length) > max_loop_iterations()
    ):
        return False
    if WIDE:
        return length >= WIDE_ILP * WIDE_LANES
    return (
        not _cpu_adapter()
        and SPLIT
        and n_out < SPLIT_MAX_OUTPUTS
        and SPLIT_MIN_LEN <= length <= WIDE_MAX_LEN
    )


def _fused_plan(n_out: int, length: int, op: str, acc: str):
    """(chunks P, chunk length C) of a one-pass split (see FUSED), or None."""
    if FUSED is False or FORCE_MODE is not None or FORCE_SPLIT is not None or not SPLIT:
        return None
    if length == 0:  # (an empty row: the row kernel's identity)
        return None
    if not fused_ok(op, acc) or state_words(op, acc) > FUSED_WORDS:
        return None
    if FUSED is None and (
        WIDE is True or _cpu_adapter() or n_out >= SPLIT_MAX_OUTPUTS or length < SPLIT_MIN_LEN
    ):
        return None  # (WIDE True: a test forcing the wide kernel)
    parts = builtins.min(
        -(-FUSED_TARGET_WORKGROUPS // n_out), builtins.max(length // FUSED_MIN_CHUNK, 2)
    )
    chunk = -(-length // parts)
    chunk = -(-chunk // WG) * WG  # (whole 256-element strides, multiples of 4)
    parts = -(-length // chunk)
    limit = max_loop_iterations()
    if (
        parts < 2
        or n_out * parts > FUSED_MAX_UNITS
        or fused_loop_iterations(chunk, parts, state_words(op, acc)) > limit
    ):
        return None
    return parts, chunk


def _fused_scratch(dev):
    """The device's persistent scratch for one-pass splits: FUSED_MAX_UNITS slots of
    FUSED_WORDS words, all FUSED_EMPTY, then FUSED_MAX_UNITS counters at 0."""
    words = FUSED_MAX_UNITS * FUSED_WORDS
    data = np.concatenate(
        [np.full(words, FUSED_EMPTY, np.uint32), np.zeros(FUSED_MAX_UNITS, np.uint32)]
    )
    return dev.persistent(("reduce.fused", FUSED_MAX_UNITS, FUSED_WORDS), data), words


def _split_plan(n_out: int, length: int, wide: bool = False):
    """(chunks P, chunk length C, partial-stage mode, merge-stage mode), or None: no split;
    `wide`: the rows take the wide row kernel instead (see _wide), unless a split is required."""
    limit = max_loop_iterations()
    cpu = _cpu_adapter()
    # past this length even the row kernel's loops pass the loop budget: a split is required,
    # in chunks whose own loops fit (serial chunks on CPU adapters, row chunks elsewhere)
    required = reduce_loop_iterations("row", length) > limit
    serial_cap = builtins.min(SERIAL_MAX_LEN_CPU, limit) // WG * WG
    if length == 0:  # (an empty row: the row kernel's identity, forced split or not)
        return None
    if FORCE_SPLIT is not None:
        parts = FORCE_SPLIT
    elif required:
        row_cap = (limit - reduce_loop_iterations("row", 0)) * WG  # a chunk's row loops fit
        cap = builtins.min(SPLIT_CHUNK_CPU, serial_cap) if cpu else row_cap
        parts = -(-length // builtins.max(cap, WG))
    elif not SPLIT or wide:
        return None
    elif cpu:
        if n_out >= SPLIT_MAX_OUTPUTS_CPU or length <= SERIAL_MAX_LEN_CPU:
            return None
        parts = -(-length // SPLIT_CHUNK_CPU)
    else:
        if n_out >= SPLIT_MAX_OUTPUTS or length < SPLIT_MIN_LEN:
            return None
        parts = builtins.min(-(-SPLIT_TARGET_WORKGROUPS // n_out), length // SPLIT_MIN_CHUNK)
    if parts < 2:
        return None
    # chunks of whole 256-element strides, so each invocation's loop runs C/256 times
    chunk = -(-length // parts)
    chunk = -(-chunk // WG) * WG
    parts = -(-length // chunk)
    partial = "serial" if cpu and chunk <= serial_cap else "row"
    merge = "serial" if cpu and parts <= serial_cap else "row"
    if (
        reduce_loop_iterations("row", parts) > limit
    ):  # only with a tiny forced budget: P states still too many
        raise NotImplementedError(
            f"pyrite: a reduction of {length:,} elements a row needs {parts:,} partial states, "
            f"more than one merge may loop over on this device ({limit:,} iterations)"
        )
    return parts, chunk, partial, merge


class _ReturnType(tuple):
    """A (values, indices)-style named pair like torch.return_types.max."""

    _fields = ("values", "indices")
    _name = "max"

    def __new__(cls, a, b):
        return tuple.__new__(cls, (a, b))

    def __repr__(self):
        return (
            f"pyrite.return_types.{self._name}(\n{self._fields[0]}={self[0]!r},\n"
            f"{self._fields[1]}={self[1]!r})"
        )


def _return_type(name, fields=("values", "indices")):
    cls = type(name, (_ReturnType,), {"_fields": fields, "_name": name, "__slots__": ()})
    for k, f in enumerate(fields):
        setattr(cls, f, property(lambda self, k=k: self[k]))
    return cls


max_return = _return_type("max")
min_return = _return_type("min")
aminmax_return = _return_type("aminmax", ("min", "max"))


# ---- dims ----------------------------------------------------------------------------------
def _dims(x: Tensor, dim) -> tuple:
    """Reduced dims as a sorted tuple of non-negative ints (None or () → all)."""
    if dim is None:
        return tuple(range(x.ndim))
    if isinstance(dim, (list, tuple)):
        if len(dim) == 0:
            return tuple(range(x.ndim))
        out = []
        for d in dim:
            nd = x._dim(d)
            if nd in out:
                raise RuntimeError(f"pyrite: dim {nd} appears multiple times in the list of dims")
            out.append(nd)
        return tuple(sorted(out)) if x.ndim else ()
    d = x._dim(dim)  # validates for 0-d tensors too ([-1, 0], as torch)
    return (d,) if x.ndim else ()


def int_dim(name: str, dim):
    """`dim` where torch takes one int (cumsum, cummax, argmax, prod's dim overload): a
    None, float, bool, tuple or list there is torch's TypeError ("cumsum(): argument 'dim' must
    be int, not NoneType"; measured, torch 2.13), not an out-of-range IndexError."""
    if type(dim) is int or (
        isinstance(dim, (int, np.integer, Tensor)) and not isinstance(dim, (bool, np.bool_))
    ):
        return dim
    raise TypeError(f"pyrite: {name}(): argument 'dim' must be int, not {type(dim).__name__}")


def _out_shape(x: Tensor, dims, keepdim) -> tuple:
    if keepdim:
        return tuple(1 if i in dims else d for i, d in enumerate(x._shape))
    return tuple(d for i, d in enumerate(x._shape) if i not in dims)


# Plans of single-dispatch reductions by everything they depend on (as ops/matmul's GEMM
# plans): a training step sums the same bias gradients every step.
_plans = PlanCache()


def _reduce(x: Tensor, op: str, dims, keepdim, out_dtypes, acc=None, param=0.0, out_ctypes=None):
    """Run reduction `op` of `x` over `dims`; one output tensor per entry of `out_dtypes`."""
    global LAST_PATH
    dev = backend.current()
    _plans.for_device(dev)
    key = (
        x._shape, x._strides, x._offset, x.dtype, op, tuple(dims), keepdim, tuple(out_dtypes),
        acc, param, None if out_ctypes is None else tuple(out_ctypes), max_loop_iterations(),
        FORCE_MODE, SPLIT, FORCE_SPLIT, WIDE, FUSED, _cpu_adapter(), SUBGROUPS, SUM4,  # (tests set)
    )  # fmt: skip
    plan = _plans.get(key)
    if plan is not None:
        shape, path = plan[0], plan[-1]
        LAST_PATH = path
        one = math.prod(shape) == 1  # (a scalar: the host may read it, MAPPABLE)
        outs = [empty(shape, dt, one) for dt in out_dtypes]
        if len(plan) == 5:
            _, src, info, grid, _ = plan
            dev.dispatch(src, [x._storage.buffer] + [o._storage.buffer for o in outs], info, grid)
        elif len(plan) == 6:  # a one-pass split: the device's scratch beside the input
            _, src, info, grid, scratch, _ = plan
            bufs = [x._storage.buffer, scratch.buffer] + [o._storage.buffer for o in outs]
            dev.dispatch(src, bufs, info, grid)
        else:  # a split reduction: partial states into scratch, then the merge
            _, (src1, info1, grid1, words, src2, info2, grid2), _ = plan
            part = empty((words,), D.int32)
            dev.dispatch(src1, [x._storage.buffer, part._storage.buffer], info1, grid1)
            dev.dispatch(
                src2, [part._storage.buffer] + [o._storage.buffer for o in outs], info2, grid2
            )
        return outs
    return _reduce_plan(dev, key, x, op, dims, keepdim, out_dtypes, acc, param, out_ctypes)


def _reduce_plan(dev, key, x, op, dims, keepdim, out_dtypes, acc, param, out_ctypes):
    shape = _out_shape(x, dims, keepdim)
    n_out = math.prod(shape)
    length = math.prod(x._shape[d] for d in dims)
    outs = [empty(shape, dt, n_out == 1) for dt in out_dtypes]
    if n_out == 0:
        return outs
    acc = acc or ("f32" if x.dtype.kind == "f" else "i32")
    if out_ctypes is None:
        # a bool result of all/any is computed as a bool; the extremes of a bool tensor (amax,
        # max, aminmax, ...) accumulate its 0/1 as i32 and store that
        out_ctypes = tuple(
            dt.ctype if dt.kind != "b" else ("bool" if op in ("all", "any") else "i32")
            for dt in out_dtypes
        )
    kept = [i for i in range(x.ndim) if i not in dims]
    oshape, (ostr,) = coalesce(
        tuple(x._shape[i] for i in kept), [tuple(x._strides[i] for i in kept)]
    )
    ishape, (istr,) = coalesce(
        tuple(x._shape[i] for i in dims), [tuple(x._strides[i] for i in dims)]
    )
    global LAST_PATH
    fused = _fused_plan(n_out, length, op, acc)
    if fused is not None:
        parts, chunk = fused
        LAST_PATH = f"fused P={parts} C={chunk}"
        scratch, counters = _fused_scratch(dev)
        vec = _vec(x, "row", ostr, istr, length, chunk)
        src = _kernel(x, op, acc, outs, out_ctypes, oshape, ishape, "row", "fused", vec)
        info = [n_out, length, x._offset, f32_bits(param), *oshape, *ostr, *ishape, *istr]
        info += [chunk, parts, counters]
        grid = fold_grid(n_out * parts)
        bufs = [x._storage.buffer, scratch.buffer] + [o._storage.buffer for o in outs]
        dev.dispatch(src, bufs, info, grid)
        _plans.keep(key, (shape, src, info, grid, scratch, LAST_PATH), 4096)
        return outs
    wide = _wide(n_out, length, state_words(op, acc))
    split = _split_plan(n_out, length, wide)
    if split is not None:
        LAST_PATH = f"split P={split[0]} C={split[1]}"
        steps = _split_reduce(
            x,
            op,
            outs,
            acc,
            tuple(out_ctypes),
            param,
            n_out,
            length,
            oshape,
            ostr,
            ishape,
            istr,
            split,
        )
        _plans.keep(key, (shape, steps, LAST_PATH), 4096)
        return outs
    mode = "row" if wide else _mode(n_out, length)
    LAST_PATH = "row wide" if wide else mode
    lanes, ilp = (WIDE_LANES, WIDE_ILP) if wide else (WG, 1)
    units = 1 if wide else _row_units(mode, length)
    vec = _vec(x, mode, ostr, istr, length, length)
    src = _kernel(
        x, op, acc, outs, out_ctypes, oshape, ishape, mode, "full", vec, units, lanes, ilp,
        sum4=wide if SUM4 is None else SUM4,
    )  # fmt: skip
    info = [n_out, length, x._offset, f32_bits(param), *oshape, *ostr, *ishape, *istr]
    grid = fold_grid(-(-n_out // units)) if mode == "row" else grid_for(n_out)
    dev.dispatch(src, [x._storage.buffer] + [o._storage.buffer for o in outs], info, grid)
    _plans.keep(key, (shape, src, info, grid, LAST_PATH), 4096)
    return outs


def _kernel(x, op, acc, outs, out_ctypes, oshape, ishape, mode, stage, vec, rows=1, lanes=WG,
            ilp=1, sum4=None):  # fmt: skip
    """reduce_kernel for input `x` into `outs` (coalesced kept and reduced shapes oshape,
    ishape); `sum4` None: SUM4's setting."""
    return reduce_kernel(
        op,
        x.dtype.wgsl,
        acc,
        tuple(o.dtype.wgsl for o in outs),
        tuple(out_ctypes),
        len(oshape),
        len(ishape),
        mode,
        stage,
        vec,
        rows,
        lanes,
        ilp,
        backend.current().subgroups if SUBGROUPS else 0,
        sum4=bool(SUM4) if sum4 is None else sum4,
    )


VEC4 = True  # False: the scalar loads only (A/B)
# SUM4: the vec4 loop of an f32 sum or mean adds each vec4's four elements plainly,
# (x + y) + (z + w), and folds that into the compensated state: one TwoSum (with its three p_opaque steps) a vec4
# instead of four. The block's own rounding is relative to the block, not to the running sum,
# so alike terms no longer drift (100,000 copies of 0.1 stay within an ulp or two of the float64
# sum); what it costs in accuracy is at most ~2 ulp of each block, unlike a plain running sum's
# n ulp of the total. Why: one workgroup of 1,024 runs a small sum (x.sum() of 128x768, the
# wide row kernel), arithmetic bound on one SM: its 13.2 µs of GPU time on the H100
# against a plain sum's ~4 (scripts/dispatch_probe.py --sum, 2026-12-06). Measured (H100,
# 2026-12-06, scripts/sum4_ab.py, GPU µs without / with, wgpu-native and Dawn; docs/bench/
# 2026-12-06-h100-s31-runs.txt): the wide kernel's 98,304 elements 13.0 / 10.1 and 16.9 / 14.1,
# 262,144 22.8 / 15.3 and 27.0 / 18.5; the split kernels even (1,048,576: 13.1 / 13.4, 20.2 /
# 20.1; 16.7 M 36.4 / 35.9). Its cost on random normal data: the wide sum of 98,304 from 0.03 to
# 1.03 ulp of float64's (torch CPU's float32 sum of the same: 4.3 ulp mean, 16.7 max over 20
# draws), the split sum of 1,048,576 from 0.26 to 2.74; and where the terms cancel (random
# normal or uniform in ±1e-3) up to 4.9 ulp of the (small) result over 15 draws on lavapipe,
# where the TwoSum an element stays within 2. Three µs of one kernel against that: off.
# None: the wide (one-workgroup) kernel only; True / False: every f32 sum / none (A/B).
SUM4 = False
# A GPU's row kernel gives a row the fewest invocations (32 .. 256) that leave each at most
# ROW_UNIT_ELEMS elements, several rows a workgroup of 256 (kernels/reduce.reduce_kernel's
# `rows`); 0: one row a workgroup (A/B). H200 (2026-12-03, rowmap_ab), row sums of 65,536 x 1024
# at 0 / 8 / 16: 908 / 2,264 / 2,819 GB/s (Dawn 1,135 / 2,659 / 3,128; torch CUDA ~3,650).
ROW_UNIT_ELEMS = 16
# Row-mode units merge their invocations' states by subgroup operations where the device has
# them (kernels/reduce._sg_tree: one barrier, no serial merges of 16). Unmeasured on a GPU yet.
SUBGROUPS = True


def _row_units(mode: str, length: int) -> int:
    """Rows a workgroup of the row kernel takes (see ROW_UNIT_ELEMS): 1 on a CPU adapter."""
    if mode != "row" or not ROW_UNIT_ELEMS or _cpu_adapter():
        return 1
    for lanes in (32, 64, 128):
        if -(-length // lanes) <= ROW_UNIT_ELEMS:
            rows = WG // lanes
            if reduce_loop_iterations("row", length * rows) <= max_loop_iterations():
                return rows
    return 1


def _vec(x, mode, ostr, istr, length, chunk) -> int:
    """4 where the row kernel may read the input as vec4s (kernels/reduce.reduce_kernel's
    `vec`): one reduced dim of unit stride, a 4-byte type, the offset, the kept dims' strides,
    the row length and the chunk multiples of 4; else 1."""
    ok = VEC4 and mode == "row" and tuple(istr) == (1,) and x.dtype.wgsl in ("f32", "i32", "u32")
    ok = ok and x._offset % 4 == 0 and length % 4 == 0 and chunk % 4 == 0
    return 4 if ok and builtins.all(st % 4 == 0 for st in ostr) else 1


def _split_reduce(
    x, op, outs, acc, out_ctypes, param, n_out, length, oshape, ostr, ishape, istr, split
):
    """The two dispatches of a split reduction; partial states go to an int32 scratch tensor.
    Returns the two steps (kernels, info words, grids, scratch words) for the plan cache."""
    parts, chunk, mode1, mode2 = split
    out_stypes = tuple(o.dtype.wgsl for o in outs)
    units = n_out * parts
    words = units * state_words(op, acc)
    part = empty((words,), D.int32)
    dev = backend.current()
    vec = _vec(x, mode1, ostr, istr, length, chunk)
    src1 = reduce_kernel(
        op,
        x.dtype.wgsl,
        acc,
        out_stypes,
        out_ctypes,
        len(oshape),
        len(ishape),
        mode1,
        "partial",
        vec,
        sg=dev.subgroups if SUBGROUPS else 0,
        sum4=bool(SUM4),
    )
    info1 = [
        n_out,
        length,
        x._offset,
        f32_bits(param),
        *oshape,
        *ostr,
        *ishape,
        *istr,
        chunk,
        parts,
    ]
    grid1 = fold_grid(units) if mode1 == "row" else grid_for(units)
    dev.dispatch(src1, [x._storage.buffer, part._storage.buffer], info1, grid1)
    sg = dev.subgroups if SUBGROUPS else 0
    src2 = reduce_kernel(op, "f32", acc, out_stypes, out_ctypes, 0, 0, mode2, "merge", sg=sg)
    info2 = [n_out, length, parts, f32_bits(param)]
    grid2 = fold_grid(n_out) if mode2 == "row" else grid_for(n_out)
    dev.dispatch(src2, [part._storage.buffer] + [o._storage.buffer for o in outs], info2, grid2)
    return (src1, info1, grid1, words, src2, info2, grid2)


def _float_dtype(x: Tensor):
    return x.dtype if x.dtype.kind == "f" else D.float32


def _int_or_same(x: Tensor):
    return x.dtype if x.dtype.kind == "f" else D.int32


def _need_float(x: Tensor, name: str):
    if x.dtype.kind != "f":
        raise DtypeError(  # (torch: a RuntimeError)
            f"pyrite: {name}(): expected a floating point input, got {x.dtype!r}"
        )


def _acc_for(dt) -> str:
    return "f32" if dt.kind == "f" else "i32"


def _empty_check(x: Tensor, dims, name: str, dim_given: bool):
    """Max-like reductions have no identity: an empty run is an error, as in PyTorch."""
    if math.prod(x._shape[d] for d in dims) == 0:
        if not dim_given:
            raise RuntimeError(
                f"pyrite: {name}(): Expected reduction dim to be specified for "
                "input.numel() == 0. Specify the reduction dim with the 'dim' "
                "argument."
            )
        raise IndexError(
            f"pyrite: {name}(): Expected reduction dim {dims[0] if dims else 0} "
            "to have non-zero size."
        )


def _given(dim) -> bool:
    """Whether a reduction names its dims (dim=() and None mean all of them)."""
    return not (dim is None or (isinstance(dim, (tuple, list)) and len(dim) == 0))


# ---- sum / mean / prod ---------------------------------------------------------------------
def _cast_first(input: Tensor, dtype) -> Tensor:
    """torch's dtype= casts each element before reducing: sum(dtype=float16) of float32 adds the
    float16-rounded values, sum(dtype=bool) adds bools (any). A cast the kernel's own read does
    the same (to a wider float, to int: truncation) is left to it."""
    if dtype is None:
        return input
    dt = D.from_any(dtype)
    if dt is input.dtype or not (
        dt.is_bool or (dt.kind == "f" and input.dtype.kind == "f" and dt.itemsize < 4)
    ):
        return input
    return input.to(dt)


def sum(input, dim=None, keepdim=False, *, dtype=None):
    return _sum("sum", input, dim, keepdim, dtype)


def nansum(input, dim=None, keepdim=False, *, dtype=None):
    return _sum("nansum", input, dim, keepdim, dtype)


def _sum(op, input, dim, keepdim, dtype):
    input = _cast_first(input, dtype)
    out_dt = D.from_any(dtype) if dtype is not None else _int_or_same(input)
    dims = _dims(input, dim)
    n = math.prod(input._shape[d] for d in dims)
    if _exact_needed(op, input, dims, out_dt) and not range_rules.sum_fits(input, n):
        out = _exact_int_reduce(op, input, dim, keepdim, out_dt)
    else:
        out = _reduce(input, op, dims, keepdim, (out_dt,), _acc_for(out_dt))[0]
    range_rules.after_sum(input, out, n)  # (`lengths = mask.int().sum(1)` stays bounded)
    return out


def prod(input, dim=None, keepdim=False, *, dtype=None):
    if dim is not None:  # (torch's prod takes one dim: prod(x, (0,)) is its TypeError)
        int_dim("prod", dim)
    input = _cast_first(input, dtype)
    out_dt = D.from_any(dtype) if dtype is not None else _int_or_same(input)
    if _exact_needed("prod", input, _dims(input, dim), out_dt):
        return _exact_int_reduce("prod", input, dim, keepdim, out_dt)
    return _reduce(input, "prod", _dims(input, dim), keepdim, (out_dt,), _acc_for(out_dt))[0]


def mean(input, dim=None, keepdim=False, *, dtype=None):
    # A float dtype= is the result's only: torch CPU sums the input's own values in f32, divides
    # and rounds once (mean(dtype=float16) of float32 data does not round the elements to
    # float16 first, unlike sum(dtype=float16); measured, torch 2.13)
    if dtype is None or not D.from_any(dtype).is_floating_point:
        input = _cast_first(input, dtype)
    if dtype is not None:
        out_dt = D.from_any(dtype)
    else:
        out_dt = input.dtype
    if out_dt.kind != "f":  # (torch: a RuntimeError)
        raise DtypeError(
            "pyrite: mean(): could not infer output dtype. Input dtype must be a "
            f"floating point dtype (or pass dtype=). Got: {out_dt!r}"
        )
    return _reduce(input, "mean", _dims(input, dim), keepdim, (out_dt,), "f32")[0]


# ---- max / min / argmax / argmin / amax / amin / aminmax -----------------------------------
def _extreme(name, input, dim, keepdim, other):
    from .elementwise import maximum, minimum

    if isinstance(dim, Tensor) or isinstance(other, Tensor):
        return (maximum if name == "max" else minimum)(input, dim if other is None else other)
    if dim is None:
        dims = _dims(input, None)
        _empty_check(input, dims, name, False)
        op = "amax" if name == "max" else "amin"
        return keep(_reduce(input, op, dims, False, (input.dtype,))[0], input)
    dims = _dims(input, dim)
    _empty_check(input, dims, name, True)
    vals, idx = _reduce(input, f"{name}_dim", dims, keepdim, (input.dtype, D.int32))
    keep(vals, input)  # (an int tensor's extremes lie in its range)
    _note_index(idx, input, dims)
    return (max_return if name == "max" else min_return)(vals, idx)


def max(input, dim=None, keepdim=False, *, other=None):
    """max(input) → value; max(input, dim, keepdim) → (values, indices); max(a, b) → maximum."""
    return _extreme("max", input, dim, keepdim, other)


def min(input, dim=None, keepdim=False, *, other=None):
    return _extreme("min", input, dim, keepdim, other)


def amax(input, dim=(), keepdim=False):
    dims = _dims(input, dim)
    _empty_check(input, dims, "amax", _given(dim))
    return keep(_reduce(input, "amax", dims, keepdim, (input.dtype,))[0], input)


def amin(input, dim=(), keepdim=False):
    dims = _dims(input, dim)
    _empty_check(input, dims, "amin", _given(dim))
    return keep(_reduce(input, "amin", dims, keepdim, (input.dtype,))[0], input)


def aminmax(input, *, dim=None, keepdim=False):
    dims = _dims(input, dim)
    _empty_check(input, dims, "aminmax", dim is not None)
    lo, hi = _reduce(input, "aminmax", dims, keepdim, (input.dtype, input.dtype))
    return aminmax_return(keep(lo, input), keep(hi, input))


def _arg(name, input, dim, keepdim):
    if dim is not None:
        int_dim(name, dim)
    if input.dtype.is_bool:
        raise DtypeError(f"pyrite: {name}(): does not support bool input")  # (torch: RuntimeError)
    if dim is None:
        if input.numel() == 0:
            raise IndexError(
                f"pyrite: {name}(): Expected reduction dim to be specified for input.numel() == 0."
            )
        out = _reduce(input, name, _dims(input, None), False, (D.int32,))[0]
        _note_index(out, input, _dims(input, None))
        if keepdim:
            out = out._view((1,) * input.ndim, (0,) * input.ndim, 0)
        return out
    dims = _dims(input, dim)
    _empty_check(input, dims, name, True)
    out = _reduce(input, name, dims, keepdim, (D.int32,))[0]
    _note_index(out, input, dims)
    return out


def _note_index(idx, input, dims):
    """An index over `dims` lies in [0, their size), known without a readback: a greedy
    decode's `emb(logits.argmax(-1))` then makes no round trip for its range check (and can
    replay whole in pr.compile(fullgraph=True))."""
    note_indices(idx, input, math.prod(input._shape[d] for d in dims))


def argmax(input, dim=None, keepdim=False):
    return _arg("argmax", input, dim, keepdim)


def argmin(input, dim=None, keepdim=False):
    return _arg("argmin", input, dim, keepdim)


# ---- var / std -----------------------------------------------------------------------------
def _correction(dim, unbiased, correction):
    """PyTorch's overloads: var(x, unbiased), var(x, dim, unbiased, keepdim), correction=."""
    if isinstance(dim, bool):
        dim, unbiased = None, dim
    if correction is not None and unbiased is not None:
        raise RuntimeError("pyrite: cannot specify both correction and unbiased")
    if correction is None:
        correction = 1 if unbiased is None or unbiased else 0
    return dim, float(correction)


def _moments(op, input, dim, unbiased, keepdim, correction):
    _need_float(input, op.split("_")[0])
    dim, c = _correction(dim, unbiased, correction)
    dims = _dims(input, dim)
    count = math.prod(input._shape[d] for d in dims)
    if count - c <= 0:
        from ..errors import warn

        warn(
            f"{op.split('_')[0]}(): degrees of freedom is <= 0. Correction should be strictly "
            "less than the reduction factor (input numel divided by output numel)."
        )
    n = 2 if op.endswith("_mean") else 1
    outs = _reduce(input, op, _dims(input, dim), keepdim, (input.dtype,) * n, "f32", param=c)
    return tuple(outs) if n == 2 else outs[0]


def var(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    return _moments("var", input, dim, unbiased, keepdim, correction)


def std(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    return _moments("std", input, dim, unbiased, keepdim, correction)


def var_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    return _moments("var_mean", input, dim, unbiased, keepdim, correction)


def std_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    return _moments("std_mean", input, dim, unbiased, keepdim, correction)


# ---- logsumexp, all/any, count_nonzero, norm -----------------------------------------------
def logsumexp(input, dim, keepdim=False):
    return _reduce(input, "logsumexp", _dims(input, dim), keepdim, (_float_dtype(input),), "f32")[0]


def all(input, dim=None, keepdim=False):
    return _all_any("all", input, dim, keepdim)


def any(input, dim=None, keepdim=False):
    return _all_any("any", input, dim, keepdim)


def _all_any(op, input, dim, keepdim):
    # torch's rules: dim=() reduces nothing (each element tested alone), and a uint8 input
    # gives a uint8 result (its legacy mask type)
    if isinstance(dim, (tuple, list)) and len(dim) == 0:
        from .elementwise import binary

        out = binary("ne", input, 0)
    else:
        out = _reduce(input, op, _dims(input, dim), keepdim, (D.bool_,), "i32")[0]
    return out.to(D.uint8) if input.dtype is D.uint8 else out


def count_nonzero(input, dim=None):
    return _reduce(input, "count_nonzero", _dims(input, dim), False, (D.int32,), "i32")[0]


def norm(input, p="fro", dim=None, keepdim=False, dtype=None):
    _need_float(input, "norm")
    if p == "fro" and isinstance(dim, (tuple, list)) and len(dim) > 2:
        raise RuntimeError(f"pyrite: linalg.matrix_norm: dim must be a 2-tuple. Got {dim}")
    if p is None or p == "fro":
        p = 2
    if isinstance(p, str):
        raise ArgumentError(f"pyrite: norm: p={p!r} is not supported (use 'fro' or a number)")
    p = float(p)
    op = {2.0: "norm2", 1.0: "norm1", 0.0: "norm0", math.inf: "norminf", -math.inf: "normninf"}.get(
        p, "normp"
    )
    out_dt = D.from_any(dtype) if dtype is not None else input.dtype
    dims = _dims(input, dim)
    if (op in ("norminf", "normninf") or p < 0) and math.prod(input._shape[d] for d in dims) == 0:
        # (p < 0 too: the sum of no |x|^p is 0, and 0^(1/p) would be inf, as torch refuses)
        raise RuntimeError(
            f"pyrite: linalg.vector_norm cannot compute the {p:g} norm on an empty tensor "
            "because the operation does not have an identity"
        )
    return _reduce(input, op, dims, keepdim, (out_dt,), "f32", param=p)[0]


# ---- scans ---------------------------------------------------------------------------------
def _scan(op, input, dim, dtype):
    global SCAN_LAST_PATH
    if dtype is not None and D.from_any(dtype).is_bool:  # (torch: "cumsum_out_cpu" not
        # implemented for 'Bool'; a bool running sum would be a running any)
        raise DtypeError(f"pyrite: {op}(): not implemented for a bool result (dtype=bool)")
    input = _cast_first(input, dtype)
    out_dt = D.from_any(dtype) if dtype is not None else _int_or_same(input)
    d = input._dim(dim)  # a 0-d tensor takes dims -1 and 0
    d = d if input.ndim else None
    out = empty(input._shape, out_dt)
    n = input.numel()
    if n == 0:
        return out
    if d is None:  # a 0-d tensor: the scan of one element is the element
        return _reduce(
            input, "sum" if op == "cumsum" else "prod", (), False, (out_dt,), _acc_for(out_dt)
        )[0]
    if input._storage is out._storage:
        input = contiguous_copy(input)
    length = input._shape[d]
    ostrides = contiguous_strides(input._shape)
    kept = [i for i in range(input.ndim) if i != d]
    oshape, (istr, ostr) = coalesce(
        tuple(input._shape[i] for i in kept),
        [tuple(input._strides[i] for i in kept), tuple(ostrides[i] for i in kept)],
    )
    rows = n // length
    mode = _mode(rows, length)
    acc = _acc_for(out_dt)
    info = [rows, length, input._offset, input._strides[d], ostrides[d], *oshape, *istr, *ostr]
    bufs = [input._storage.buffer, out._storage.buffer]
    dev = backend.current()
    parts = _lookback_parts(rows, length, acc)
    if parts is not None:  # one pass (kernels/reduce.py's "lookback")
        SCAN_LAST_PATH = f"lookback P={parts}"
        unit = _lookback_unit(length)
        info += [unit, parts, SCAN_LOOKBACK_UNITS]
        k = (op, input.dtype.wgsl, acc, out_dt.wgsl, len(oshape), "row", "lookback", True)
        order, reset = SCAN_LOOKBACK_VARIANT
        src = scan_kernel(
            *k,
            SCAN_LOOKBACK_SB,
            _lookback_spins(),
            order,
            reset,
            unit,
            SCAN_LOOKBACK_EARLY,
            SCAN_STAGE_UNROLL,
        )
        scratch = _lookback_scratch(dev).buffer
        dev.dispatch(src, [input._storage.buffer, scratch, out._storage.buffer], info,
                     fold_grid(rows * parts))  # fmt: skip
        if reset == "pass":
            sbs = rows * -(-parts // SCAN_LOOKBACK_SB)
            n = [rows * parts, sbs, SCAN_LOOKBACK_UNITS]
            dev.dispatch(lookback_clear_kernel(), [scratch], n, fold_grid(-(-n[0] // WG)))
        return out
    chunk = _scan_chunk(rows, length, mode)
    if chunk is None:  # (_mode already moved a serial row past the loop budget to "row")
        SCAN_LAST_PATH = "rows"
        staged = SCAN_STAGE and mode == "row" and length <= SCAN_STAGED
        src = scan_kernel(
            op, input.dtype.wgsl, acc, out_dt.wgsl, len(oshape), mode, "", staged,
            unroll=SCAN_STAGE_UNROLL,
        )  # fmt: skip
        grid = fold_grid(rows) if mode == "row" else grid_for(rows)
        dev.dispatch(src, bufs, info, grid)
        return out
    # chunked: totals of each chunk, their inclusive scan (a shorter scan), then each chunk's
    # scan started from the totals before it
    parts = -(-length // chunk)
    info += [chunk, parts]
    acc_dt = D.float32 if acc == "f32" else D.int32
    part = empty((rows, parts), acc_dt)
    grid = fold_grid(rows * parts)
    unit = _chunk_unit()
    staged = SCAN_STAGE and chunk <= unit
    unit = unit if staged else SCAN_STAGED
    k = (op, input.dtype.wgsl, acc)
    src = scan_kernel(
        *k, acc_dt.wgsl, len(oshape), "row", "total", staged, unit=unit, unroll=SCAN_STAGE_UNROLL
    )
    dev.dispatch(src, [input._storage.buffer, part._storage.buffer], info, grid)
    carry = _scan(op, part, 1, acc_dt)
    SCAN_LAST_PATH = f"chunked C={chunk}"  # (after the carry's own scan, which sets its path)
    src = scan_kernel(
        *k, out_dt.wgsl, len(oshape), "row", "apply", staged, unit=unit, unroll=SCAN_STAGE_UNROLL
    )
    bufs = [input._storage.buffer, carry._storage.buffer, out._storage.buffer]
    dev.dispatch(src, bufs, info, grid)
    return out


# Chunked scans: rows whose one-workgroup scan would pass the loop budget must be chunked; on a
# GPU, few long rows are also chunked so that more than a handful of workgroups run (the same
# rule and constants as the split reductions above: fewer than SPLIT_MAX_OUTPUTS rows of at
# least SPLIT_MIN_LEN, chunks of at least SPLIT_MIN_CHUNK). H200, 2026-12-01
# (scripts/scan_check.py: cumsum along dim 1, GB/s read+write, chunked / whole rows, Dawn | wgpu-native):
#   (1, 16M) 78 / 3.5 | 171 / 3.8     (4, 4M) 93 / 14 | 188 / 14
#   (64, 65536) 37 / 39 | 89 / 92     (1024, 4096) 45 / 45 | 121 / 119  (torch CUDA 1,728)
# so the rule gains 20-45x where it applies and costs nothing measurable where it does not.
FORCE_SCAN_CHUNK = None  # tests set a chunk length to reach the chunked kernels at small sizes


def _scan_chunk(rows: int, length: int, mode: str):
    """The chunk length of a chunked scan, or None to scan each row whole."""
    if FORCE_SCAN_CHUNK is not None:
        return FORCE_SCAN_CHUNK if length > FORCE_SCAN_CHUNK else None
    limit = max_loop_iterations()
    if scan_loop_iterations("row", length) > limit:
        # the longest chunk whose row-mode loops fit (two passes of ceil(C/256) steps); at least
        # 256
        chunk = builtins.max(WG, (limit - scan_loop_iterations("row", 0)) // 2 * WG)
        return chunk if chunk < length else None
    if _cpu_adapter() or rows >= SPLIT_MAX_OUTPUTS or length < SPLIT_MIN_LEN:
        return None
    parts = builtins.min(-(-SCAN_TARGET_WORKGROUPS // rows), length // SPLIT_MIN_CHUNK)
    if parts < 2:
        return None
    chunk = -(-(-(-length // parts)) // WG) * WG
    return builtins.min(chunk, _chunk_unit()) if SCAN_STAGE else chunk


def _chunk_unit() -> int:
    """The staged unit of the chunked path's kernels (their longest staged chunk):
    SCAN_CHUNK_UNIT where set and the device's workgroup memory holds it, else SCAN_STAGED."""
    unit = SCAN_CHUNK_UNIT or SCAN_STAGED
    return unit if _unit_fits(unit, lookback=False) else SCAN_STAGED


def _unit_fits(unit: int, lookback: bool) -> bool:
    """Whether the device's workgroup memory holds a staged scan of `unit` elements."""
    room = backend.current().limits.get("max-compute-workgroup-storage-size", 16384)
    return scan_shared_bytes(unit, lookback) <= room


# The chunked path's staged unit, so its longest chunk (None: SCAN_STAGED; a multiple of WG,
# A/B: the look-back gained from chunks of 4,096, SCAN_LOOKBACK_LONG_CHUNK).
SCAN_CHUNK_UNIT = None


# chunks a chunked scan aims for (rows · chunks): the reductions' old 4,096. At the reductions'
# 1,024 the H200's cumsum of one row of 16M f32 fell from 389 to 120 GB/s (2026-12-03, `pyrite
# bench`): a scan's chunk is walked by one workgroup, so its chunks want to be short.
SCAN_TARGET_WORKGROUPS = 4096
# Row-mode units of at most SCAN_STAGED elements pass through workgroup memory (kernels/reduce.py
# SCAN_STAGED: coalesced loads and stores), and a GPU's chunks are cut to that length. False:
# never (A/B).
SCAN_STAGE = True
# A full staged unit's loads issued together (kernels/reduce._staged_load, and the chunked
# totals pass), not one a loop step. False: the loop (A/B). H100, wgpu-native, 2026-12-07
# (scripts/scan_ab.py --unroll 0,1, GPU time, us, looped / unrolled;
# docs/bench/2026-12-07-h100-s40-scan-next.json): look-back (1, 16M) 155.7 / 129.6, (1, 8M)
# 79.1 / 67.6, (1, 4M) 37.2 / 33.6, (4, 4M) 155.7 / 133.1, (64, 65536) 34.6 / 30.9; chunked
# (1, 16M) 123.3 / 115.0, (4, 4M) 112.8 / 104.6; whole rows of 1,024 and 4,096 unchanged.
SCAN_STAGE_UNROLL = True


# One-pass scans (kernels/reduce.py's "lookback"): on a GPU, rows longer than one staged unit
# (SCAN_STAGED) are cut into chunks of SCAN_STAGED, all scanned in one dispatch, each chunk
# starting from the chunks before it through the persistent scratch, where the other paths read
# the input twice (totals, then the rescan: chunked rows) or read a row's blocks uncoalesced
# (whole rows). f32 compute only (the scratch's ready flag is a NaN pattern; integer scans keep
# the chunked path). Chosen by rows and lengths alone, as the chunk rule is (a strided view
# scans with the kernels its contiguous copy gets, so the two give the same bits). The rule
# takes it up to SCAN_LOOKBACK_RULE_UNITS chunks (rows x chunks); forced (tests, A/B), up to
# SCAN_LOOKBACK_UNITS, the scratch's slots, each reset by the scan's last workgroup.
# H100, wgpu-native, 2026-12-07 (scripts/scan_ab.py, GPU time by timestamps, us, look-back /
# the path before it, torch CUDA's GB/s; docs/bench/2026-12-07-h100-s39-scan-ab.json):
#   (1, 1M) 512 chunks 17.2 / 22.0 (chunked, 3 dispatches)     (64, 65536) 2,048: 37.3 / 39.5
#   (1024, 4096) 2,048: 33.9 / 65.4 (whole rows, uncoalesced)  (1, 16M) 8,192: 183.6 / 123.5
#   (4, 4M) 8,192: 188.4 / 111.9
# so a chunk costs the look-back ~20 ns of a serial part (~22 ns a chunk at 8,192, ~17 at
# 2,048): its short workgroups (2,048 elements, ~30 barriers, three L2 round trips) leave too
# little work a workgroup to hide their latency once the chunks run to many waves. Where that
# part is below the two-pass path's second read, it wins. Session 40 (same card,
# docs/bench/2026-12-07-h100-s40-scan-*.json): neither same-address atomic is that part (the
# variants without them within 2 % at every shape), nor the superblock chain
# (SCAN_LOOKBACK_EARLY); chunks of 4,096 (SCAN_LOOKBACK_LONG_CHUNK) and unrolled loads
# (SCAN_STAGE_UNROLL) bring (1, 16M) to 129.6 us (chunked 115.0), (1, 8M) 67.6 (66.6), (1, 4M)
# 33.6 (37.8), (1, 1M) 13.3 (22.0). The look-back still moves ~1 TB/s where the chunked path's
# staged kernels move ~2: what holds it there is not yet found (a guess: its occupancy).
SCAN_LOOKBACK = None  # None: the rule above; False: never (A/B); True: wherever it fits (tests)
SCAN_LOOKBACK_UNITS = 1 << 16
SCAN_LOOKBACK_RULE_UNITS = 2048
# (chunk order, reset) of the look-back kernel (kernels/reduce.scan_kernel's `order`, `reset`):
# ("ticket", "last") as measured above; ("id", ...) and (..., "pass") drop the two same-address
# atomics a chunk, the first suspect for its serial cost (scripts/scan_ab.py --lookback: not
# yet measured on a GPU)
SCAN_LOOKBACK_VARIANT = ("ticket", "last")
SCAN_LOOKBACK_SPINS = None  # polls a wait (None: _lookback_spins' rule; < 0: none, always computed)
SCAN_LOOKBACK_SB = WG  # chunks a superblock (kernels/reduce.py; tests shrink it to reach SB waits)
# Elements a look-back chunk (_lookback_unit): SCAN_LOOKBACK_CHUNK where set (a multiple of WG:
# A/B, tests), else on a GPU SCAN_LOOKBACK_LONG_CHUNK for rows longer than it, else
# SCAN_STAGED; where the device's workgroup memory holds it (kernels/reduce.scan_shared_bytes).
# H100, wgpu-native, 2026-12-07 (scripts/scan_ab.py --units, GPU time, us, chunks of 2,048 /
# 4,096 / 8,192; docs/bench/2026-12-07-h100-s40-scan-unit.json): (1, 1M) 17.0 / 13.0 / 13.5,
# (64, 65536) 37.4 / 33.6 / 42.6, (1, 16M) 182.4 / 153.6 / 186.8; (1024, 4096) 33.9 with two
# chunks of 2,048 against 65.4 for its rows whole.
SCAN_LOOKBACK_CHUNK = None
SCAN_LOOKBACK_LONG_CHUNK = 2 * SCAN_STAGED
# A superblock's total stored before its last chunk waits for the superblocks before it
# (kernels/reduce.py _lookback_prefix `early`: the same bits, a tree more a chunk), so no chain
# of waits runs through the superblocks of a row. Slower by its tree on the H100 (same run as
# SCAN_STAGE_UNROLL's, unrolled, us, without / with: (1, 16M) 129.6 / 135.6, (1, 8M) 67.6 /
# 72.2, (4, 4M) 133.1 / 136.2, (64, 65536) 30.9 / 32.4): that chain is not what limits the
# look-back, so off.
SCAN_LOOKBACK_EARLY = False
SCAN_LAST_PATH = ""  # "lookback P=<chunks>" | "chunked C=<chunk>" | "rows": the last scan's kernel


def _lookback_parts(rows: int, length: int, acc: str):
    """Chunks P a row of a one-pass scan takes, or None: another path."""
    if SCAN_LOOKBACK is False or acc != "f32" or not SCAN_STAGE or FORCE_SCAN_CHUNK is not None:
        return None
    unit = _lookback_unit(length)
    if SCAN_LOOKBACK is None and (_cpu_adapter() or length <= unit):
        return None
    parts = -(-length // unit)
    cap = SCAN_LOOKBACK_UNITS if SCAN_LOOKBACK else SCAN_LOOKBACK_RULE_UNITS
    its = lookback_loop_iterations(rows, parts, SCAN_LOOKBACK_SB, _lookback_spins(), unit)
    if parts < 2 or rows * parts > cap or its > max_loop_iterations():
        return None
    return parts


def _lookback_unit(length: int | None = None) -> int:
    """Elements a look-back chunk of rows of `length`: SCAN_LOOKBACK_CHUNK where set, else on a
    GPU SCAN_LOOKBACK_LONG_CHUNK for rows longer than it (SCAN_STAGED's chunks for shorter
    ones: two of them beat the whole row), else SCAN_STAGED; SCAN_STAGED wherever the device's
    workgroup memory cannot hold the chunk."""
    unit = SCAN_LOOKBACK_CHUNK or SCAN_STAGED
    if SCAN_LOOKBACK_CHUNK is None and not _cpu_adapter():
        if length is None or length > SCAN_LOOKBACK_LONG_CHUNK:
            unit = SCAN_LOOKBACK_LONG_CHUNK
    if unit % WG:
        raise ValueError(f"pyrite: SCAN_LOOKBACK_CHUNK {unit} is not a multiple of {WG}")
    return unit if _unit_fits(unit, lookback=True) else SCAN_STAGED


def _lookback_spins() -> int:
    """Polls of a look-back wait before it computes the word itself: a GPU's owner stores it
    within microseconds (FUSED_SPINS polls are milliseconds); a CPU adapter's may be a thread
    the OS has not run yet, and computing a chunk's total is cheap there."""
    if SCAN_LOOKBACK_SPINS is not None:
        return SCAN_LOOKBACK_SPINS
    return 64 if _cpu_adapter() else FUSED_SPINS


def _lookback_scratch(dev):
    """The device's persistent scratch for one-pass scans: two counters at 0, then
    SCAN_LOOKBACK_UNITS chunk totals and as many superblock totals, all FUSED_EMPTY."""
    n = SCAN_LOOKBACK_UNITS
    data = np.concatenate([np.zeros(2, np.uint32), np.full(2 * n, FUSED_EMPTY, np.uint32)])
    return dev.persistent(("reduce.lookback", n), data)


def cumsum(input, dim, *, dtype=None):
    int_dim("cumsum", dim)
    return _check_scan("cumsum", input, dim, _scan("cumsum", input, dim, dtype))


def cumprod(input, dim, *, dtype=None):
    int_dim("cumprod", dim)
    return _check_scan("cumprod", input, dim, _scan("cumprod", input, dim, dtype))


FUNCS = {
    "sum": sum,
    "nansum": nansum,
    "mean": mean,
    "prod": prod,
    "max": max,
    "min": min,
    "amax": amax,
    "amin": amin,
    "aminmax": aminmax,
    "argmax": argmax,
    "argmin": argmin,
    "var": var,
    "std": std,
    "var_mean": var_mean,
    "std_mean": std_mean,
    "logsumexp": logsumexp,
    "all": all,
    "any": any,
    "count_nonzero": count_nonzero,
    "norm": norm,
    "cumsum": cumsum,
    "cumprod": cumprod,
}
__all__ = [
    "all",
    "amax",
    "amin",
    "aminmax",
    "any",
    "argmax",
    "argmin",
    "count_nonzero",
    "cumprod",
    "cumsum",
    "logsumexp",
    "max",
    "mean",
    "min",
    "nansum",
    "norm",
    "prod",
    "std",
    "std_mean",
    "sum",
    "var",
    "var_mean",
]

METHODS = {k: v for k, v in FUNCS.items() if k not in ("var_mean", "std_mean")}


# ---- integer exactness (issue 8; owned by the dtypes work) ----------------------------------
# PyTorch gives integer sums, products and scans as int64; pyrite's integers are int32, so a
# result that leaves int32 is refused with OverflowError naming the op, never wrapped. The check
# costs a readback (one bool), so it runs only where overflow is possible: bool and small-int
# inputs whose element count bounds the result inside int32 skip it (uint8: rows up to 8.4M
# elements for sum), as do results given an explicit small dtype (x.sum(dtype=uint8) wraps mod
# 256 as in PyTorch) or a float one. Sums and products accumulate exactly (kernels/reduce.py
# isum / iprod: a 64-bit sum, a magnitude with a sticky overflow bit) and report `fits` per
# output; scans are checked after the fact: with every earlier prefix exact, step j overflowed
# iff W[j-1] + x[j] (or W[j-1] * x[j]) overflows int32, one map over the output and an any().
_INT32_TOP = 2**31 - 1


def _int_bound(dt) -> int:
    return 1 if dt.is_bool else builtins.max(abs(dt.min), dt.max)


def _exact_needed(op, x: Tensor, dims, out_dt) -> bool:
    if out_dt is not D.int32 or x.dtype.kind not in "ib":
        return False
    n = math.prod(x._shape[d] for d in dims)
    b = _int_bound(x.dtype)
    if op in ("sum", "nansum", "cumsum"):
        return b * n > _INT32_TOP
    return b > 1 and n > 1 and (n >= 32 or b**n > _INT32_TOP)


def _overflow(name):
    return OverflowError(
        f"pyrite: {name}: the result does not fit in int32, pyrite's integer type (PyTorch "
        f"gives int64 here); compute in float (x.float().{name}(...)) or on smaller pieces"
    )


def _exact_int_reduce(op, input, dim, keepdim, out_dt):
    kernel_op = "iprod" if op == "prod" else "isum"
    vals, fits = _reduce(
        input,
        kernel_op,
        _dims(input, dim),
        keepdim,
        (out_dt, D.bool_),
        "i32",
        out_ctypes=("i32", "bool"),
    )
    global LAST_PATH
    path = LAST_PATH  # the sum's own kernel path, not the flag check's (tests read it)
    ok = not fits.numel() or fits.all().item()
    LAST_PATH = path
    if not ok:
        raise _overflow(op)
    return vals


def _check_scan(op, x: Tensor, dim, out: Tensor) -> Tensor:
    d = x._dim(dim) if x.ndim else None
    if op == "cumsum":  # (HF's position ids, `mask.int().cumsum(1)`, stay bounded)
        range_rules.after_cumsum(x, out, x._shape[d] if x.ndim else 1)
    if d is None or x._shape[d] < 2 or not _exact_needed(op, x, (d,), out.dtype):
        return out
    if op == "cumsum" and range_rules.sum_fits(x, x._shape[d]):
        return out  # (its range says no prefix can overflow: nothing to read back)
    from .core import run_map
    from .views import narrow

    L = x._shape[d]
    w, prev, xs = narrow(out, d, 1, L - 1), narrow(out, d, 0, L - 1), narrow(x, d, 1, L - 1)
    if op == "cumsum":  # x0 = W[j], x1 = W[j-1], x2 = x[j]: the signs of an overflowed add
        expr = "((x1 ^ x0) & (x2 ^ x0)) < 0"
    else:  # a product that overflowed does not divide back (WGSL's i32 division cannot trap)
        expr = "x2 != 0 && (x0 / x2 != x1 || (x1 == i32(-2147483647 - 1) && x2 == -1))"
    flags = run_map(expr, (w, prev, xs), ("i32", "i32", "i32"), empty(w._shape, D.bool_), "bool")
    if flags.any().item():
        raise _overflow(op)
    return out


# ---- backward rules (pyrite/autograd.py) ------------------------------------------------------
from ..autograd import is_grad_enabled  # noqa: E402
from ..autograd import saves as _saves  # noqa: E402


def _dims_of(shape, dim):
    """The reduced dims, non-negative and sorted (dim None or () = all)."""
    n = len(shape)
    if dim is None or (isinstance(dim, (tuple, list)) and len(dim) == 0):
        return list(range(n))
    if isinstance(dim, int):
        dim = (dim,)
    if not n:  # a 0-d input: dim 0 / -1 names the tensor itself, no dim to expand back
        return []
    return sorted({d % n for d in dim})


_ALIASES = {"dim": "axis", "keepdim": "keepdims"}  # NumPy's names, which the methods take


def _ctx_arg(ctx, i, name, default):
    a = ctx.args
    if len(a) > i:
        return a[i]
    k = ctx.kwargs
    return k[name] if name in k else k.get(_ALIASES.get(name, name), default)


def _live_out(ctx, fn):
    """The saved output, or recomputed (recorded) while a double backward is recorded."""
    from .. import autograd

    if not autograd.is_grad_enabled():
        return ctx.out
    return fn(*ctx.args, **ctx.kwargs)


def _expand_back(g, shape, dims, keepdim):
    """g of a reduction over `dims` made the input's shape again."""
    if not keepdim and len(shape):
        kshape = [1 if i in dims else s for i, s in enumerate(shape)]
        g = g.reshape(kshape)
    return g.expand(*shape) if len(shape) else g.reshape(())


@_saves()
def _g_sum(ctx, g):
    shape = ctx.meta[0][0]
    dims = _dims_of(shape, _ctx_arg(ctx, 1, "dim", None))
    return (_expand_back(g, shape, dims, _ctx_arg(ctx, 2, "keepdim", False)),)


@_saves()
def _g_mean(ctx, g):
    shape = ctx.meta[0][0]
    dims = _dims_of(shape, _ctx_arg(ctx, 1, "dim", None))
    count = 1
    for d in dims:
        count *= shape[d]
    return (
        _expand_back(g, shape, dims, _ctx_arg(ctx, 2, "keepdim", False)) / builtins.max(count, 1),
    )


def _evenly(x, out, g, dims, keepdim, nan_ties=False):
    """The gradient of a max/min over `dims`: shared evenly among the tied extremes (torch's
    amax/amin and full max/min). nan_ties (torch's evenly_distribute_backward, full max/min):
    a NaN result's ties are the NaN elements, and the others get exactly 0 (a masked fill, so an
    infinite g stays off them); amax/amin keep g·mask/count (NaN everywhere for a NaN result)."""
    shape = x._shape
    o = _expand_back(out, shape, dims, keepdim)
    mask = x == o
    if nan_ties:
        from .elementwise import where

        mask = mask | (x.isnan() & o.isnan())
        count = sum(mask, dim=dims, keepdim=True)
        return where(mask, _expand_back(g, shape, dims, keepdim) / count, 0.0)
    count = sum(mask, dim=dims, keepdim=True)
    return _expand_back(g, shape, dims, keepdim) * mask / count


@_saves(0, "out")
def _g_amax(ctx, g):
    x = ctx.args[0]
    dims = _dims_of(x._shape, _ctx_arg(ctx, 1, "dim", ()))
    return (_evenly(x, ctx.out, g, dims, _ctx_arg(ctx, 2, "keepdim", False)),)


def _g_max(ctx, g):
    """max(x) (one value: evenly among ties), max(x, dim) (values, indices: to the index),
    max(x, other) (elementwise)."""
    x = ctx.args[0]
    dim = _ctx_arg(ctx, 1, "dim", None)
    other = ctx.kwargs.get("other")
    if isinstance(dim, Tensor) or other is not None:  # max(a, b): elementwise, ties split
        b = dim if isinstance(dim, Tensor) else other
        wa = ((x > b) if ctx.name == "max" else (x < b)) + (x == b) * 0.5
        return g * wa, g * (1.0 - wa)
    if dim is None:
        return (_evenly(x, ctx.out, g, _dims_of(x._shape, None), False, nan_ties=True),)
    gv = g[0]
    if gv is None:
        return (None,)
    from .creation import zeros

    keepdim = _ctx_arg(ctx, 2, "keepdim", False)
    idx = ctx.out[1]
    d = dim % builtins.max(x.ndim, 1)
    if not keepdim and x.ndim:
        gv, idx = gv.unsqueeze(d), idx.unsqueeze(d)
    gx = zeros(x._shape, dtype=gv.dtype)
    return (gx.scatter(d, idx, gv) if x.ndim else gv.reshape(()),)


_g_max.out_reads = frozenset((1,))  # max(x, dim): the indices (max(x): one output, checked)


_g_max.saves = frozenset((0, 1, "out"))


def _var_grad_args(ctx):
    """(dims, keepdim, correction, full) of a var/std/var_mean/std_mean call, read as the forward
    reads them (var(x, False) is the unbiased overload, not dim=0)."""
    dim, c = _correction(
        _ctx_arg(ctx, 1, "dim", None),
        _ctx_arg(ctx, 2, "unbiased", None),
        ctx.kwargs.get("correction"),
    )
    shape = ctx.args[0]._shape
    keepdim = _ctx_arg(ctx, 3, "keepdim", False)
    return _dims_of(shape, dim), keepdim, c, dim is None or len(shape) == 0


def _var_dx(x, gk, dims, c, full):
    """torch's var_backward: 2 / (n - correction) * g * (x - mean), unclamped (the forward clamps
    the degrees of freedom at 0; its gradient does not), except for a full reduction with
    n <= correction: g * (nan where x == mean, else inf)."""
    from .elementwise import where

    n = math.prod(x._shape[d] for d in dims)
    dev = x - mean(x, dim=dims, keepdim=True)
    if full and n - c <= 0:
        return gk * where(dev == 0, float("nan"), float("inf"))
    return gk * (2.0 / (n - c) if n != c else float("inf")) * dev


def _g_var(ctx, g, is_std=False):
    x = ctx.args[0]
    dims, keepdim, c, full = _var_grad_args(ctx)
    gk = _expand_back(g, x._shape, dims, keepdim)
    if is_std:
        from .elementwise import where

        o = _expand_back(_live_out(ctx, std), x._shape, dims, keepdim)
        # torch's std_backward: 0 where the deviation is 0 (one element, constant rows)
        gk = where(o == 0, 0.0, gk / (2.0 * o))
    return (_var_dx(x, gk, dims, c, full),)


_g_var.saves = frozenset((0,))  # (std reads its output; var does not: torch neither)


def _g_std(ctx, g):
    return _g_var(ctx, g, is_std=True)


_g_std.saves = frozenset((0, "out"))


def _g_var_mean(ctx, g, is_std=False):
    """(var or std, mean): var's (std's) gradient plus the mean's g/n spread evenly."""
    gv, gm = g
    x = ctx.args[0]
    shape = x._shape
    dims, keepdim, c, full = _var_grad_args(ctx)
    res = None
    if gv is not None:
        gk = _expand_back(gv, shape, dims, keepdim)
        if is_std:
            from .elementwise import where

            o = _expand_back(_live_out(ctx, std_mean)[0], shape, dims, keepdim)
            gk = where(o == 0, 0.0, gk / (2.0 * o))
        res = _var_dx(x, gk, dims, c, full)
    if gm is not None:
        n = math.prod(shape[d] for d in dims)
        t = _expand_back(gm, shape, dims, keepdim) / float(builtins.max(n, 1))
        res = t if res is None else res + t
    return (res,)


_g_var_mean.saves = frozenset((0, "out"))


def _g_std_mean(ctx, g):
    return _g_var_mean(ctx, g, is_std=True)


_g_std_mean.saves = frozenset((0, "out"))


def _g_aminmax(ctx, g):
    """(min, max): each shared evenly among its tied extremes (torch's amin/amax rule)."""
    x = ctx.args[0]
    dim = ctx.kwargs.get("dim")
    keepdim = ctx.kwargs.get("keepdim", False)
    dims = _dims_of(x._shape, dim)
    res = None
    for gi, oi in zip(g, ctx.out):
        if gi is None:
            continue
        t = _evenly(x, oi, gi, dims, keepdim)
        res = t if res is None else res + t
    return (res,)


_g_aminmax.saves = frozenset((0, "out"))


@_saves(0, "out")
def _g_logsumexp(ctx, g):
    from .elementwise import exp

    x = ctx.args[0]
    dims = _dims_of(x._shape, _ctx_arg(ctx, 1, "dim", None))
    keepdim = _ctx_arg(ctx, 2, "keepdim", False)
    o = _expand_back(_live_out(ctx, logsumexp), x._shape, dims, keepdim)
    return (_expand_back(g, x._shape, dims, keepdim) * exp(x - o),)


def _exclusive_products(x, dims):
    """Each element's product of the others over `dims` (torch's prod_safe_zeros_backward): the
    cumulative product before it times the one after it, defined where x has zeros (out / x is
    0 / 0 there, and inf / inf beside an inf). Several dims go as one, in row-major order."""
    from .combine import cat, flip
    from .creation import ones
    from .views import narrow

    if len(dims) != 1:  # (the reduced dims moved last and flattened into one)
        kept = [i for i in range(x.ndim) if i not in dims]
        perm = kept + list(dims)
        moved = x.permute(*perm)
        flat = moved.reshape(*moved._shape[: len(kept)], -1)
        e = _exclusive_products(flat, [len(kept)]).reshape(*moved._shape)
        return e.permute(*[perm.index(i) for i in range(x.ndim)])
    d = dims[0]
    n = x._shape[d]
    one = ones(*[1 if i == d else s for i, s in enumerate(x._shape)], dtype=x.dtype)
    if n == 1:
        return one
    head = cumprod(cat([one, narrow(x, d, 0, n - 1)], d), d)  # Π_{j<i} x_j
    tail = flip(cumprod(cat([one, flip(narrow(x, d, 1, n - 1), (d,))], d), d), (d,))  # Π_{j>i}
    return head * tail


@_saves(0, "out")
def _g_prod(ctx, g):
    """torch's prod_backward: g·out/x where x has no zero anywhere, else g times the product of
    the other elements (_exclusive_products); 0 for a whole-tensor prod with two zeros or more
    (unless a double backward is recorded). The rule is the whole tensor's, as in torch: a row
    [inf, 2] beside a zero in another row takes the exclusive products, [2, inf], not out / x's
    [nan, inf]. The choice is made on the device, by where; only while a double backward is
    recorded is the zero count read back (where's other branch would pass 0·inf gradients).

    Unlike torch, a row whose product is not finite and nonzero takes the exclusive products too
    (decided by the math: d/dx_i Π x = Π_{j!=i} x_j). torch's out / x is inf / inf or NaN / NaN
    at the inf or NaN itself, NaN where the limit is finite: prod([inf, 2, 3]) -> torch [nan,
    inf, inf], pyrite [6, inf, inf]; prod([nan, 2]) -> torch [nan, nan], pyrite [2, nan]; and
    inf / x where finite elements overflowed (or 0 where they underflowed) instead of the
    others' product. Elsewhere the two rules are the same numbers up to rounding."""
    from .elementwise import isfinite, where

    x = ctx.args[0]
    if not x._shape:
        return (g,)
    dim = _ctx_arg(ctx, 1, "dim", None)
    dims = _dims_of(x._shape, dim)
    keepdim = _ctx_arg(ctx, 2, "keepdim", False)
    gk = _expand_back(g, x._shape, dims, keepdim)
    if x.numel() == 0:
        return (gk,)
    xg = x if x.dtype is g.dtype else x.to(g.dtype)  # (torch: self.to(grad's dtype))
    zeros = sum(x == 0)
    if is_grad_enabled():
        o = _expand_back(_live_out(ctx, prod), x._shape, dims, keepdim)
        if zeros.item() == 0 and bool((isfinite(o) & (o != 0)).all().item()):
            return (gk * (o / xg),)
        return (gk * _exclusive_products(xg, dims),)
    o = _expand_back(ctx.out, x._shape, dims, keepdim)
    others = gk * _exclusive_products(xg, dims)
    if not _given(dim):
        others = where(zeros > 1, 0.0, others)
    plain = (zeros == 0) & isfinite(o) & (o != 0)  # (o == 0 without a zero: an underflow)
    return (where(plain, gk * (o / xg), others),)


def _reverse_cumsum(t, d):
    from .combine import flip

    return flip(cumsum(flip(t, (d,)), d), (d,))


@_saves()
def _g_cumsum(ctx, g):
    # each input element feeds every output at or after it: the reversed cumulative sum of g
    if not ctx.meta[0][0]:
        return (g,)
    return (_reverse_cumsum(g, _ctx_arg(ctx, 1, "dim", None) % len(ctx.meta[0][0])),)


@_saves(0, "out")
def _g_cumprod(ctx, g):
    """torch's cumprod_backward. d out_j / d x_i = out_j / x_i (j >= i) before a row's first
    zero z1: the reversed cumulative sum of g·out, taken over j < z1 only (past z1, out is 0, or
    NaN after an inf), divided by x. At z1: out[z1-1]·Σ_{z1<=j<z2} g_j·Π_{z1<i<=j} x_i (z2 the
    second zero). After it: 0. While a double backward is recorded: out / x where x has no zero
    and no inf or NaN (read back, as torch does), else the products of the other elements,
    O(n²) (torch's own rule there).

    Unlike torch, a row's first inf or NaN b before z1 takes the same form as z1 (decided by the
    math: d out_j / d x_b = Π_{i<=j, i!=b} x_i does not hold x_b): out[b-1]·Σ_{j>=b} g_j·
    Π_{b<i<=j} x_i, where torch's out / x is inf / inf or NaN / NaN, NaN where the value is
    finite: cumprod([inf, 2, 3]) with g = [1, -1, 0.5] -> torch [nan, nan, inf], pyrite [2,
    nan, inf] (torch's own create_graph rule gives 2 too). Past b the products hold x_b: inf or
    NaN in both, torch's values kept ([inf, -inf]: torch's and pyrite's [nan, nan], the math's
    [nan, -inf] with g = 1: an infinite value, left as torch's NaN)."""
    from .elementwise import isfinite, where
    from .scatter import gather

    x, out = ctx.args[0], ctx.out
    if x.numel() <= 1:
        return (g,)
    d = _ctx_arg(ctx, 1, "dim", None) % x.ndim
    if x._shape[d] == 1:
        return (g,)
    if is_grad_enabled():
        # create_graph: the saved output is an alias without a graph; recompute it from x so
        # the second derivative sees it depend on x
        if (~x.isfinite()).any().item():
            return (_cumprod_grad_sliced(x, g, d),)
        if (x == 0).any().item():
            return (_cumprod_grad_omitted(x, g, d),)
        return (_reverse_cumsum(g * cumprod(x, d), d) / x,)
    zero = x == 0
    seen = cumsum(zero, d)  # int: how many zeros up to here
    before = seen == 0
    between = seen == 1  # [z1, z2)
    first = zero & between
    plain = _reverse_cumsum(where(before, g * out, 0.0), d) / where(before, x, 1.0)
    after_first = cumprod(where(between & ~first, x, 1.0), d)  # Π_{z1<i<=j} x_i on [z1, z2)
    # (g masked by where, the product not: torch's 0·inf past z2 gives NaN as its does)
    at_zero = sum(after_first * where(between, g, 0.0), d, keepdim=True)
    n_before = sum(before, d, keepdim=True)  # z1
    last = gather(out, d, (n_before - 1).clamp(min=0))  # out[z1-1]
    at_zero = at_zero * where(n_before == 0, 1.0, last)
    torchs = where(before, plain, where(first, at_zero, 0.0))
    # the first inf or NaN b, before z1: out[b-1]·Σ_{j>=b} g_j·Π_{b<i<=j} x_i, each term as
    # the math has it (past z1 a product is 0, or NaN where it holds an inf too)
    bad = ~isfinite(x)
    seen_bad = cumsum(bad, d)
    span = seen_bad > 0  # [b, n)
    at_b = bad & (seen_bad == 1) & before
    after_b = cumprod(where(span & ~at_b, x, 1.0), d)  # Π_{b<i<=j} x_i
    at_bad = sum(where(span, after_b * g, 0.0), d, keepdim=True)
    n_good = sum(seen_bad == 0, d, keepdim=True)  # b
    last = gather(out, d, (n_good - 1).clamp(min=0))  # out[b-1]: finite, nonzero
    at_bad = at_bad * where(n_good == 0, 1.0, last)
    # (where that is not finite, torch's: past b its rule is inf / inf as well, and the math's
    # inf or NaN there would take an O(n²) rule per inf; a finite value is the fix)
    return (where(at_b & isfinite(at_bad), at_bad, torchs),)


def _cumprod_grad_sliced(x, g, d):
    """torch's O(n²) cumprod_backward, slice by slice: for each k, prod(x[:k])·cumprod(x[k+1:])
    dotted with g[k:]. Its second derivative is prod's and the slices' cumprod rules, which an
    inf beside a zero tells apart from _cumprod_grad_omitted's one cumprod with x_k as 1: x =
    [1, 0, inf] gave d/dx_2 0·inf = NaN through (g·out)/x where torch's is 4 (the one-element
    slice [inf] has no rule). n dispatch rounds, so only where x holds an inf or a NaN."""
    from .combine import cat
    from .creation import ones

    n = x._shape[d]
    one = list(x._shape)
    one[d] = 1
    parts = []
    for k in range(n):
        if k == 0:
            omitted = cat([ones(one, dtype=x.dtype), cumprod(x.narrow(d, 1, n - 1), d)], d)
        else:
            until = prod(x.narrow(d, 0, k), d, keepdim=True)
            if k == n - 1:
                omitted = until
            else:
                after = cumprod(x.narrow(d, k + 1, n - k - 1), d)
                omitted = cat([until, until.expand_as(after) * after], d)
        parts.append(sum(g.narrow(d, k, n - k) * omitted, d, keepdim=True))
    return cat(parts, d)


def _cumprod_grad_omitted(x, g, d):
    """Σ_{j>=k} g_j·Π_{i<=j, i!=k} x_i for each k of dim d: the cumulative product along j of x
    with x_k taken as 1, in blocks of k (an (..., k, j) tensor each): torch's O(n²) rule, whose
    own derivative is cumprod's second derivative where x has zeros."""
    from .combine import cat
    from .creation import arange
    from .elementwise import where

    xm, gm = x.movedim(d, -1), g.movedim(d, -1)  # (..., n)
    n = xm._shape[-1]
    rows = builtins.max(1, xm.numel() // n)
    block = builtins.max(1, (1 << 22) // (rows * n))
    j = arange(n).reshape(1, n)
    parts = []
    for k0 in range(0, n, block):
        k = arange(k0, builtins.min(n, k0 + block)).reshape(-1, 1)
        c = cumprod(where(j == k, 1.0, xm.unsqueeze(-2)), -1)  # (..., kb, n)
        parts.append(sum(where(j >= k, gm.unsqueeze(-2) * c, 0.0), -1))  # (..., kb)
    return (cat(parts, -1) if len(parts) > 1 else parts[0]).movedim(-1, d)


@_saves(0, "out")
def _g_norm(ctx, g):
    """torch's norm_backward: x·|x|^(p-2)·g / norm^(p-1) (0 where the norm is 0); p = 1:
    sign(x)·g; p = ±inf: sign(x)·g shared evenly among the |x| equal to the norm; p = 0: none.
    Half inputs take the rule in float32 (g / norm^(p-1) of a small half norm overflows: a
    CosineSimilarity of 1e-3-scale float16 vectors had inf gradients where torch's are finite)."""
    from .elementwise import sign

    x, out = ctx.args[0], ctx.out
    p = _ctx_arg(ctx, 1, "p", "fro")
    p = 2.0 if p is None or p == "fro" else float(p)
    dims = _dims_of(x._shape, _ctx_arg(ctx, 2, "dim", None))
    keepdim = _ctx_arg(ctx, 3, "keepdim", False)
    gk = _expand_back(g, x._shape, dims, keepdim)
    if is_grad_enabled():  # create_graph: the norm as a function of x (see _g_cumprod)
        out = norm(x, _ctx_arg(ctx, 1, "p", "fro"), dims, keepdim)
    nk = _expand_back(out, x._shape, dims, keepdim)
    if p == 0.0:  # a count: no gradient (torch's is None too)
        return (None,)
    if p == 1.0:
        return (gk * sign(x),)
    if x.dtype in (D.float16, D.bfloat16):
        (r,) = _norm_grad_rule(x.float(), gk.float(), nk.float(), p, dims)
        return (r.to(x.dtype),)
    return _norm_grad_rule(x, gk, nk, p, dims)


def _norm_grad_rule(x, gk, nk, p, dims):
    """_g_norm's rule for p not in (0, 1), on x, the expanded gradient gk and norm nk."""
    from .elementwise import abs as _abs
    from .elementwise import sign, where

    if p == 2.0:
        return (x * where(nk == 0, 0.0, gk / where(nk == 0, 1.0, nk)),)
    if math.isinf(p):
        # torch's mask: |x| equal to the norm, or NaN (the norm is then NaN and equals nothing:
        # an all-false mask gave 0 / 0, NaN gradients everywhere; torch's are sign(x)·g there).
        # Multiplied, as torch's sgn(x)·((g / count)·mask): a NaN or infinite g reaches the whole
        # row as NaN (normalize(p=inf) over a row holding an inf), not the maxima only
        ax = _abs(x)
        hit = (ax == nk) | (ax != ax)
        count = sum(hit, dim=dims, keepdim=True)
        return (sign(x) * ((gk / count) * hit),)
    ax = _abs(x)
    if p < 1.0:
        scaled = sign(x) * where(x == 0, 0.0, ax ** (p - 1.0))
    elif p < 2.0:  # torch's form: x·|x|^(p-2) is 0·inf = NaN at x = 0 (p = 1.5)
        scaled = sign(x) * ax ** (p - 1.0)
    else:
        scaled = x * ax ** (p - 2.0)
    return (scaled * where(nk == 0, 0.0, gk / where(nk == 0, 1.0, nk) ** (p - 1.0)),)


@_saves(0)
def _g_nansum(ctx, g):
    from .elementwise import where

    x = ctx.args[0]
    dims = _dims_of(x._shape, _ctx_arg(ctx, 1, "dim", None))
    gk = _expand_back(g, x._shape, dims, _ctx_arg(ctx, 2, "keepdim", False))
    return (where(x != x, 0.0, gk),)


GRADS = {
    "sum": _g_sum,
    "nansum": _g_nansum,
    "cumsum": _g_cumsum,
    "cumprod": _g_cumprod,
    "norm": _g_norm,
    "mean": _g_mean,
    "amax": _g_amax,
    "amin": _g_amax,
    "max": _g_max,
    "min": _g_max,
    "var": _g_var,
    "std": _g_std,
    "var_mean": _g_var_mean,
    "std_mean": _g_std_mean,
    "aminmax": _g_aminmax,
    "logsumexp": _g_logsumexp,
    "prod": _g_prod,
}
