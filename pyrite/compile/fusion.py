"""Passes over a recording (backend/replay.Tape) before it becomes a Graph.

- **Elementwise fusion.** A map B (ops/core.run_map) reading the whole output of an earlier map
  A, where nothing else reads that output before its buffer is reused or the recording ends (an
  intermediate), becomes one map computing A's expression in place of B's input: one kernel, one
  fewer pass over memory, A's output never written. Chains fuse one link at a time.
- **Dead-code removal.** A dispatch whose every written buffer is overwritten or dropped before
  anything reads it (and is not an output, a parameter, optimizer state or anything else still
  held when the recording ends) is removed.

Which buffer holds which tensor when comes from the tape's allocation log: a buffer's *segment*
runs from one allocation of it to the next. Kernels an optimizer step, a schedule or a random
draw refreshes between replays (regions, dynamic and scalar words: their dispatch numbers are
how the refresh finds them) are left as they are.

Fusion keeps every intermediate value's f32 (or i32) rounding: only maps whose intermediate is
stored in its compute type fuse. It may still change the last bit of a result: a shader compiler
may contract a multiply and an add that were in two kernels into one fma.
"""

from __future__ import annotations

import bisect
import math
import os
import re

import numpy as np

from ..backend.pool import Storage
from ..backend.replay import Op
from ..kernels.common import EXPR_VAR as _VAR
from ..ops.core import broadcast_strides, map_command
from ..ops.core import f32_bits as f32_word
from ..tensor import Tensor

# compute types a map's output is stored in without rounding (storage token -> compute type)
_EXACT = {"f32": "f32", "i32": "i32", "u32": "u32"}
# A map with a transcendental function (GELU's erfc, a sigmoid, exp, tanh, ...) goes into a
# GEMM's store only on tiles of at most HEAVY_POST_MAX_SUMS sums an invocation: in a big tile's
# store it is unrolled for every one of an invocation's outputs after the K loop, and cost more
# than its own kernel. H100, wgpu-native, 2026-12-05 (scripts/compile_bert_probe.py,
# docs/bench/2026-12-05-h100-s28-compile-bert-probe.txt), 4096x768 . 3072x768^T on the 128x128
# tile of 16x8 sums: GELU fused 1,426 µs, the product and GELU as two kernels 850; BERT-base
# batch 32 compiled 33.1 ms fused, 21.9 without fusion (eager 21.8). A residual add fused into
# the 4096x3072 . 768x3072^T store was even (585 against 589). The bound of 32 (between the
# measured 128 and the K-group tile's 16, whose fused GELU gave batch-1 BERT its 2.07 ms) is an
# estimate.
HEAVY_POST_MAX_SUMS = 32
# Maps fused into a matrix-vector product's store too (kernels/matmul.gemv_rows,
# kernels/quant.qgemv: a decoding step's residual adds and SwiGLU, 403 -> 315 kernels a token
# for a 22-layer Llama). Their speed is not yet measured on a GPU; the switch (also
# PYRITE_FUSE_GEMV=0) is for that A/B (scripts/llama_decode_time.py --ab-fuse-gemv).
FUSE_GEMV = os.environ.get("PYRITE_FUSE_GEMV", "1") != "0"
_HEAVY = re.compile(
    r"\b(?:p_(?!isnan\b|isinf\b|inf\b|nan\b|opaque\b)\w+|exp2?|log2?|tanh|sinh|cosh|sin|cos|tan"
    r"|pow|sqrt|inverseSqrt|atan2?|asin|acos)\s*\("
)  # (p_isnan, p_isinf, p_inf, p_nan, p_opaque: bit tests, cheap)


def _buffers(op):
    """(read ids, written ids) of one op: a map reads its inputs and writes its output; any
    other kernel's "w" bindings count as both."""
    if op.map is not None:
        return {id(v[0]) for v in op.map[1]}, {id(op.map[3][0])}
    if op.kind == "d":
        _, modes, buffers, _, _ = op.args
        r = {id(b) for b in buffers}
        return r, {id(b) for b, m in zip(buffers, modes) if m == "w"}
    if op.kind == "c":
        return {id(op.args[0])}, {id(op.args[2])}
    if op.kind == "r":  # (a graph break reads every tensor alive there: Tape.read)
        return set(op.args[0]), set()
    return set(), {id(op.args[0])}


def optimize(tape, device, keep=frozenset(), fuse=True):
    """Fuse maps, fold constants and remove dead dispatches in `tape.ops` (in place); `keep`:
    ids of buffers the caller reads after a replay, or writes before it (outputs, captures,
    argument slots). Returns the number of maps fused away (`tape.folded`: the commands
    folded)."""
    run = _Pass(tape, device, keep)
    fused = 0
    if fuse:
        ops = run.ops
        tape.common = run.eliminate_common()
        # maps into maps first, so that a chain is one map when it meets a GEMM or a row kernel
        for passes in ((run.fuse_map,), (run.fuse_gemm, run.fuse_row)):
            for b in range(len(ops)):
                if ops[b].map is None or run.dnum[b] in run.protected:
                    continue
                while (
                    ops[b].map is not None
                    and b not in run.removed
                    and any(fuse_into(b) for fuse_into in passes)
                ):
                    fused += 1
        tape.folded = run.fold_constants()
    run.remove_dead()
    if run.removed:
        run.compact()
    return fused


class _Pass:
    """One optimize() over a tape: its ops (positions stay fixed until `compact`), the ones
    removed, each dispatch's number, the numbers a replay's refresh addresses (regions, dynamic
    and scalar words: left as they are), and the allocation log as per-buffer positions."""

    def __init__(self, tape, device, keep):
        self.tape, self.device, self.keep = tape, device, keep
        self.ops = tape.ops
        self.removed: set[int] = set()
        self.dnum, k = {}, 0
        for pos, op in enumerate(self.ops):
            if op.kind == "d":
                self.dnum[pos] = k
                k += 1
        self.protected = set(tape.dynamic) | set(tape.scalar_slots) | tape.protect
        for _, nums in tape.regions:
            self.protected.update(nums)
        self.allocs: dict[int, list[int]] = {}
        for pos, i in tape.allocs:
            self.allocs.setdefault(i, []).append(pos)
        self.limit = device.limits.get("max-storage-buffers-per-shader-stage", 8) - 1

    # ---- liveness ------------------------------------------------------------------------
    def segment(self, i, pos):
        """[start, end) of the op positions where buffer `i` holds the tensor it holds at `pos`
        (end None: to the end of the recording)."""
        a = self.allocs.get(i, ())
        k = bisect.bisect_right(a, pos)
        start = a[k - 1] if k else 0
        return start, (a[k] if k < len(a) else None)

    def gone_after(self, i, end):
        """Whether buffer `i`'s tensor in a segment ending at `end` is gone by the end (`keep`
        names buffers read after a replay: their last segment)."""
        tape = self.tape
        if i not in tape.owned:
            return False
        if end is not None:
            return True
        if i in self.keep:
            return False
        pin = tape.pool.pins.get(i)
        return pin is not None and pin.dead

    def read_between(self, i, lo, hi, skip=()):
        """Whether an op at a position in [lo, hi) (end None: to the end), not removed and not
        in `skip`, reads buffer `i`."""
        hi = len(self.ops) if hi is None else hi
        for p in range(lo, hi):
            if p not in self.removed and p not in skip and i in _buffers(self.ops[p])[0]:
                return True
        return False

    def last_writer(self, i, lo, hi):
        """The position of the last op in [lo, hi), not removed, that writes buffer `i`, or
        None."""
        return next(
            (
                p
                for p in range(hi - 1, lo - 1, -1)
                if p not in self.removed and i in _buffers(self.ops[p])[1]
            ),
            None,
        )

    def written_between(self, ids, a, b):
        """Whether an op strictly between positions a and b writes one of the buffers `ids`."""
        return any(
            p not in self.removed and ids & _buffers(self.ops[p])[1] for p in range(a + 1, b)
        )

    def producers(self, b):
        """(input number j, producer position a) for each input of map B (at `b`) that B reads
        once and that is the whole output of a kernel at `a` nothing else reads before that
        output is gone."""
        ins = self.ops[b].map[1]
        for j, v in enumerate(ins):
            i = id(v[0])
            if sum(id(w[0]) == i for w in ins) != 1:
                continue
            start, end = self.segment(i, b)
            a = self.last_writer(i, start, b)
            if a is None or a not in self.dnum or self.dnum[a] in self.protected:
                continue  # (a copy or an upload wrote it, or its kernel is refreshed)
            if not self.gone_after(i, end):
                continue
            if self.read_between(i, start, end, skip=(a, b)):
                continue
            yield j, a

    # ---- the passes ----------------------------------------------------------------------
    def fuse_map(self, b):
        """Map B's input j, the output of map A: one map computing A's expression there."""
        ops = self.ops
        B = ops[b]
        expr, ins, cts, out, oct_, scal, sct = B.map
        for j, a in self.producers(b):
            buf, shape, strides, offset, _ = ins[j]
            A = ops[a]
            if A.map is None:
                continue
            a_expr, a_ins, a_cts, a_out, a_oct, a_scal, a_sct = A.map
            if a_out[:4] != (buf, shape, strides, offset) or a_out[1] != out[1]:
                continue  # B reads exactly A's output, in B's own index space
            if _EXACT.get(a_out[4].storage) != a_oct or cts[j] != a_oct:
                continue  # the stored intermediate would round
            a_bufs = {id(v[0]) for v in a_ins}
            if id(out[0]) in a_bufs:
                continue  # (B would write what A's inputs read: keep the two)
            if self.written_between(a_bufs, a, b) or not self._same_tenants(a_bufs, a, b):
                continue  # A's inputs change before B runs (or their buffers hold new tensors)
            # B's expression with A's in place of x_j; A's inputs and scalars renumbered after B's
            n_in, n_s = len(ins), len(scal)

            def sub_a(m):
                kind, k = m.group(1), int(m.group(2))
                return f"{kind}{(n_in - 1 if kind == 'x' else n_s) + k}"

            inner = _VAR.sub(sub_a, a_expr)

            def sub_b(m):
                kind, k = m.group(1), int(m.group(2))
                if kind == "x" and k == j:
                    return f"({inner})"
                if kind == "x" and k > j:
                    return f"x{k - 1}"
                return m.group(0)

            new_expr = _VAR.sub(sub_b, expr)
            new_ins = ins[:j] + ins[j + 1 :] + a_ins
            new_cts = cts[:j] + cts[j + 1 :] + a_cts
            new_scal, new_sct = scal + a_scal, sct + a_sct
            cmd = _command(new_expr, new_ins, new_cts, out, oct_, new_scal, new_sct)
            if cmd is None:
                continue
            src, bufs, info, grid = cmd
            if len(bufs) > self.limit or len(info) >= 127:
                continue
            desc = (new_expr, new_ins, new_cts, out, oct_, new_scal, new_sct)
            self._replace(a, b, src, bufs, info, grid, map=desc)
            return True
        return False

    def fuse_gemm(self, b):
        """Map B reading the whole output of a fast GEMM A (a 2-D product, f32) or of a split-K
        product's sum: A's store computes B's expression (kernels/matmul.gemm_fast and
        splitk_sum `post`), writing B's output; A's goes. Where A's output is read elsewhere
        too (GELU's pre-activation, saved for the backward) A's store writes both (`dual`): the
        product, and B's result into B's output, at A's place (as fuse_row's)."""
        from ..kernels.matmul import gemm_fast, gemv_rows, splitk_sum
        from ..kernels.quant import qgemv

        B = self.ops[b]
        expr, ins, cts, out, oct_, scal, sct = B.map
        for j, a, dual in self._gemm_producers(b):
            buf, shape, strides, offset, _ = ins[j]
            A = self.ops[a]
            spec, c_view, post = A.gemm
            _, _, a_bufs, a_info, grid = A.args
            # the kind of product: "fast" (gemm_fast), "splitk" (the sum of a split-K product's
            # partials), "gemv" (kernels/matmul.gemv_rows) or "qgemv" (a quantized weight's,
            # kernels/quant.qgemv)
            kind = spec[0] if spec[0] in ("splitk", "gemv", "qgemv") else "fast"
            split = kind == "splitk"
            if (kind in ("fast", "gemv") and spec[1] != 0) or c_view[4].storage != "f32":
                continue  # (a batched product, or not an f32 output)
            if kind in ("gemv", "qgemv") and not FUSE_GEMV:
                continue
            if dual and post is not None:
                continue  # (a dual store from a plain product only)
            M, N = c_view[1]
            n = M * N
            ob, oshape, ostrides, ooff, odt = out
            if (
                (buf, offset) != (c_view[0], c_view[3])
                or odt.storage != "f32"
                or cts[j] != "f32"
                or oct_ != "f32"
                or not _contiguous(shape, strides)
                or not _contiguous(oshape, ostrides)
                or math.prod(shape) != n
                or math.prod(oshape) != n
                or not oshape
                or oshape[-1] != N
                or ooff % 4
            ):
                continue
            extras = self._extras(ins, j, cts, oshape, ob)
            if extras is None:
                continue
            bound = {id(x) for x in a_bufs[:-1]}
            if (
                id(ob) in bound
                or self.written_between(bound, a, b)
                or not self._same_tenants(bound, a, b)
            ):
                continue  # B writes A's operands, or they change (or are reused) before B runs
            fills = ()
            if dual:
                fills = self._movable(a, b, out, {id(v[0]) for v, _ in extras}, a_bufs)
                if fills is None:
                    continue
            # the fused expression: x0 the product (through A's own fused map, if any),
            # then A's extra operands, then B's other inputs
            p_expr, p_extras, p_scal, p_sct = post or ("x0", (), (), ())
            np_ = len(p_extras)

            def sub_a(m):
                kind, k = m.group(1), int(m.group(2))
                return m.group(0) if kind == "x" else f"s{len(scal) + k}"

            inner = _VAR.sub(sub_a, p_expr)
            new_expr = _store_expr(expr, j, len(ins), inner, np_)
            all_extras = tuple(p_extras) + tuple(extras)
            new_scal, new_sct = scal + p_scal, sct + p_sct
            words = [int(w) for w in a_info]
            if not dual:
                words[{"splitk": 3, "qgemv": 11}.get(kind, 12)] = ooff  # C is B's output
            at = len(words)
            _post_words(words, all_extras, new_scal, new_sct)
            d_at = None
            if dual:
                d_at = len(words)
                words.append(ooff)
            outs = [a_bufs[-1], ob] if dual else [ob]
            bufs = list(a_bufs[:-1]) + [v[0] for v, _ in all_extras] + outs
            if len(bufs) > self.limit or len(words) >= 127:
                continue
            if (
                kind == "fast"
                and spec[5] * spec[6] > HEAVY_POST_MAX_SUMS
                and _HEAVY.search(new_expr)
            ):
                continue  # (a transcendental map in a big tile's store: see HEAVY_POST_MAX_SUMS)
            post = (new_expr, len(all_extras), at, tuple(new_sct))
            if split:
                src = splitk_sum(spec[1], post=post, dual=d_at)
            elif kind == "gemv":
                _, nb, epi, params, sg = spec
                src = gemv_rows(nb, epi, *params, sg=sg, post=post, dual=d_at)
            elif kind == "qgemv":
                src = qgemv(*spec[1], post=post, dual=d_at)
            else:
                src = gemm_fast(*spec, post=post, dual=d_at)
            if dual:
                self._replace(b, a, src, bufs, words, grid)
                self.removed.update(fills)
                self._begin_at(id(ob), a, b)
                return True
            c2d = (ob, (M, N), (N, 1), ooff, odt)
            gemm = (spec, c2d, (new_expr, all_extras, new_scal, new_sct))
            self._replace(a, b, src, bufs, words, grid, gemm=gemm)
            return True
        return False

    def _gemm_producers(self, b):
        """(input number j, GEMM position a, dual) for map B: the producers() whose kernel is a
        described GEMM (dual False), then the GEMMs whose whole output B reads once but others
        read too (dual True)."""
        ins = self.ops[b].map[1]
        seen = set()
        for j, a in self.producers(b):
            if self.ops[a].gemm is not None:
                seen.add(j)
                yield j, a, False
        for j, v in enumerate(ins):
            i = id(v[0])
            if j in seen or sum(id(w[0]) == i for w in ins) != 1:
                continue
            start, _ = self.segment(i, b)
            a = self.last_writer(i, start, b)
            if (
                a is not None
                and self.ops[a].gemm is not None
                and self.dnum[a] not in (self.protected)
            ):
                yield j, a, True

    def _extras(self, ins, j, cts, oshape, ob):
        """B's inputs but the j-th, as (view, (offset, m stride, n stride)) over the fused
        kernel's (rows, N), or None where one is not an f32 operand those strides reach."""
        extras = []
        for k, v in enumerate(ins):
            if k == j:
                continue
            c2 = _collapse(v, oshape)
            if c2 is None or cts[k] != "f32" or v[4].storage != "f32" or v[0] is ob:
                return None
            extras.append((v, c2))
        return extras

    def _movable(self, a, b, out, extra_ids, a_bufs):
        """Whether map B (at `b`, writing `out`) can run inside kernel A at `a` < `b`: B's other
        inputs unchanged between them, and B's output untouched there but for a fill of exactly
        that view (PYRITE_POISON's NaN fill of a new tensor, which B overwrites). Returns those
        fills' positions (they go with the fusion), or None."""
        oi = id(out[0])
        if oi in {id(x) for x in a_bufs} or self.written_between(extra_ids, a, b):
            return None
        if not self._same_tenants(extra_ids, a, b) or self.read_between(oi, a + 1, b):
            return None
        fills = [
            p for p in range(a + 1, b) if p not in self.removed and oi in _buffers(self.ops[p])[1]
        ]
        for p in fills:
            m = self.ops[p].map
            if m is None or m[1] or m[3] != out or self.dnum[p] in self.protected:
                return None
        return fills

    def _same_tenants(self, ids, a, b) -> bool:
        """Whether each buffer in `ids` holds the same tensor at positions a and b (no new
        allocation of it between): a read moved from one to the other reads what it read."""
        return all(self.segment(i, a) == self.segment(i, b) for i in ids)

    def _begin_at(self, i, a, b):
        """B's output (buffer `i`), now written at `a` < `b` by the fused kernel: its tensor's
        allocation, if recorded after `a`, moves to `a` (the liveness the later passes read)."""
        start, _ = self.segment(i, b)
        if a < start <= b:
            alloc = self.allocs[i]
            alloc[alloc.index(start)] = a
            alloc.sort()

    def fuse_row(self, b):
        """Map B reading the whole f32 gradient a row gradient kernel A wrote (a residual add
        after a norm's backward): A's store computes B's expression into B's output
        (kernels/rowops.row_grad_kernel `post`). The fused kernel runs at A's place, where A's
        row statistics are written before the commands between A and B read them; so B's other
        inputs must not change between A and B, and nothing there may touch B's output."""
        from ..kernels.rowops import row_grad_kernel

        B = self.ops[b]
        expr, ins, cts, out, oct_, scal, sct = B.map
        ob, oshape, ostrides, ooff, odt = out
        for j, a in self.producers(b):
            buf, shape, strides, offset, _ = ins[j]
            A = self.ops[a]
            if A.row is None:
                continue
            spec, r_view = A.row
            _, _, a_bufs, a_info, grid = A.args
            rows, n = int(a_info[0]), int(a_info[1])
            if (
                (buf, offset) != (r_view[0], r_view[3])
                or r_view[4].storage != "f32"
                or odt.storage != "f32"
                or cts[j] != "f32"
                or oct_ != "f32"
                or not _contiguous(shape, strides)
                or not _contiguous(oshape, ostrides)
                or math.prod(shape) != rows * n
                or math.prod(oshape) != rows * n
                or not oshape
                or oshape[-1] != n
            ):
                continue
            extras = self._extras(ins, j, cts, oshape, ob)
            if extras is None:
                continue
            fills = self._movable(a, b, out, {id(v[0]) for v, _ in extras}, a_bufs)
            if fills is None:
                continue
            new_expr = _store_expr(expr, j, len(ins))
            words = _post_words([int(w) for w in a_info] + [ooff], extras, scal, sct)
            at = next(k for k, x in enumerate(a_bufs) if x is buf)
            bufs = [*a_bufs[:at], *(v[0] for v, _ in extras), ob, *a_bufs[at + 1 :]]
            if len(bufs) > self.limit or len(words) >= 127:
                continue
            post = (new_expr, len(extras), len(a_info), tuple(sct))
            src = row_grad_kernel(*spec, post=post)
            self._replace(b, a, src, bufs, words, grid)
            self.removed.update(fills)
            self._begin_at(id(ob), a, b)
            return True
        return False

    def _replace(self, a, b, src, bufs, info, grid, map=None, gemm=None):
        """B's op becomes the fused kernel (named for both); A's is removed (the fused kernel
        takes the later op's place, or the earlier's where `b` < `a`)."""
        A, B = self.ops[a], self.ops[b]
        first, second = (A, B) if a < b else (B, A)
        pipeline, modes, _ = self.device.pipeline(src)
        words = np.asarray(info, dtype=np.int32)
        site = (f"{first.inner}+{second.inner}", second.outer, second.where)
        self.ops[b] = Op("d", (pipeline, modes, tuple(bufs), words, tuple(grid)), site, map, gemm)
        self.removed.add(a)

    def eliminate_common(self) -> int:
        """Common subexpressions, by value numbering: a map or a fast GEMM (kernels whose
        outputs are pure writes) running the pipeline an earlier one ran, with the same info
        words and grid, on inputs holding the same values (the same buffers, or buffers
        refilled with the same values since: the pool reuses a dead temporary's buffer) computes
        what the earlier one did. It is dropped where the earlier one's outputs still hold
        those values through the last read of its own: those reads take them instead. Returns
        how many went."""
        ops = self.ops
        now: dict[int, object] = {}  # id(buffer) -> the value number it holds
        wrote: dict[int, dict] = {}  # position -> {id(buffer): value number written}
        first: dict[tuple, int] = {}
        twins = []
        fresh = iter(range(1 << 62))
        for p, op in enumerate(ops):
            if p in self.removed:
                continue
            reads, writes = _buffers(op)
            outs = (
                [id(x) for x, m in zip(op.args[2], op.args[1]) if m == "w"]
                if op.kind == "d"
                else []
            )
            if op.kind == "d" and (op.map or op.gemm) and self.dnum[p] not in self.protected:
                pipe, modes, bufs, words, grid = op.args
                ins = (
                    [id(v[0]) for v in op.map[1]]
                    if op.map
                    else [id(x) for x, m in zip(bufs, modes) if m != "w"]
                )
                key = (
                    id(pipe),
                    modes,
                    grid,
                    None if words is None else words.tobytes(),
                    tuple(now.setdefault(i, ("in", i)) for i in ins),
                )
                a = first.get(key)
                if a is None:
                    first[key] = p
                    vals = {i: next(fresh) for i in outs}
                else:
                    vals = dict(zip(outs, wrote[a].values()))
                    twins.append((a, p))
            else:
                vals = {i: next(fresh) for i in writes}
            wrote[p] = vals
            now.update(vals)
        gone = 0
        for a, b in twins:
            if a not in self.removed and self._take_twin(a, b, wrote):
                gone += 1
        return gone

    def _take_twin(self, a, b, wrote) -> bool:
        """Drop B (at `b`) for its twin A (eliminate_common) where A's outputs still hold their
        values through the last read of B's, and nothing but reads touches B's outputs."""
        ops = self.ops
        wa = [x for x, m in zip(ops[a].args[2], ops[a].args[1]) if m == "w"]
        wb = [x for x, m in zip(ops[b].args[2], ops[b].args[1]) if m == "w"]
        moves = []
        for xa, xb in zip(wa, wb):
            ib = id(xb)
            if ib not in self.tape.owned or ib in self.keep or xa is xb:
                return False
            _, end = self.segment(ib, b)
            hi = len(ops) if end is None else end
            readers = [
                p for p in range(b + 1, hi) if p not in self.removed and ib in _buffers(ops[p])[0]
            ]
            if any(ops[p].kind != "d" for p in readers):
                return False  # (a copy or a graph break reads it: it stays B's)
            last = readers[-1] if readers else b
            if self.written_between({ib}, b, last + 1):
                return False  # (B's output written in place: it must stay its own)
            _, end_a = self.segment(id(xa), a)
            if end_a is not None and end_a <= last:
                return False  # (A's buffer holds another tensor by then: liveness would lie)
            value = wrote[a][id(xa)]
            for q in range(a + 1, last + 1):
                if q not in self.removed and wrote.get(q, {}).get(id(xa), value) != value:
                    return False  # (A's output holds something else by then)
            moves.append((xb, xa, readers))
        for xb, xa, readers in moves:
            for p in readers:
                op = ops[p]
                pipe, modes, bufs, words, grid = op.args
                op.args = (pipe, modes, tuple(xa if x is xb else x for x in bufs), words, grid)
                if op.map is not None:
                    e, ins, *rest = op.map
                    ins = tuple((xa, *v[1:]) if v[0] is xb else v for v in ins)
                    op.map = (e, ins, *rest)
        self.removed.add(b)
        return True

    def fold_constants(self) -> int:
        """Remove the commands whose results are the same at every replay (constant folding):
        commands reading nothing but buffers such commands settle (or nothing at all: a fill,
        an arange, an upload of values an op computed), writing only buffers of the recording's
        own that are not argument slots or outputs. A buffer is settled when every command
        writing it is folded and none that stays reads it before its last write (a buffer
        reused for another value, or read between a poison fill and the real write, is not).
        The trace computed those results; they stay in the recording's buffers. Returns how
        many went."""
        owned, keep = self.tape.owned, self.keep
        io = {}
        writers: dict[int, list[int]] = {}
        readers: dict[int, list[int]] = {}
        for p, op in enumerate(self.ops):
            if p in self.removed:
                continue
            reads, writes = io[p] = _buffers(op)
            for i in writes:
                writers.setdefault(i, []).append(p)
            for i in reads:
                readers.setdefault(i, []).append(p)
        folded = {
            p
            for p, (_, writes) in io.items()
            if writes
            and not (self.ops[p].kind == "d" and self.dnum[p] in self.protected)
            and not self.ops[p].host  # (host data: new bytes every call)
            and all(i in owned and i not in keep for i in writes)
        }
        while True:
            settled = {
                i
                for i, ws in writers.items()
                if all(w in folded for w in ws)
                and not any(r not in folded and r < ws[-1] for r in readers.get(i, ()))
            }
            kept = {p for p in folded if io[p][1] <= settled and (io[p][0] - io[p][1]) <= settled}
            if kept == folded:
                break
            folded = kept
        self.removed |= folded
        return len(folded)

    def remove_dead(self):
        """Remove dispatches none of whose writes is read before being dropped (to a
        fixpoint)."""
        changed = True
        while changed:
            changed = False
            for p in range(len(self.ops) - 1, -1, -1):
                op = self.ops[p]
                if op.kind != "d" or p in self.removed or self.dnum[p] in self.protected:
                    continue
                _, writes = _buffers(op)
                if writes and all(self._dead_write(i, p) for i in writes):
                    self.removed.add(p)
                    changed = True

    def _dead_write(self, i, p):
        _, end = self.segment(i, p)
        return self.gone_after(i, end) and not self.read_between(i, p + 1, end)

    def compact(self):
        """Drop the removed ops; renumber the dispatch numbers the refresh uses."""
        tape = self.tape
        new_num, k = {}, 0
        ops = []
        for pos, op in enumerate(self.ops):
            if pos in self.removed:
                continue
            if op.kind == "d":
                new_num[self.dnum[pos]] = k
                k += 1
            ops.append(op)
        tape.ops = ops
        tape.dispatches = k
        tape.dynamic = {new_num[d]: f for d, f in tape.dynamic.items()}
        tape.scalar_slots = {new_num[d]: s for d, s in tape.scalar_slots.items()}
        tape.regions = [(f, [new_num[d] for d in nums]) for f, nums in tape.regions]


def _store_expr(expr, j, n_ins, inner="x0", shift=0):
    """Map B's expression as a kernel's fused store computes it (kernels/common.post_expr): its
    input j is `inner` (the kernel's own value x0, through any map fused into it before), its
    other inputs x{1 + shift}, x{2 + shift}, ... in order; scalars keep their numbers."""
    order = [k for k in range(n_ins) if k != j]

    def sub(m):
        kind, k = m.group(1), int(m.group(2))
        if kind == "s":
            return m.group(0)
        return f"({inner})" if k == j else f"x{1 + shift + order.index(k)}"

    return _VAR.sub(sub, expr)


def _post_words(words, extras, scal, sct):
    """`words` with post_expr's operand words appended (base, m stride, n stride of each extra
    operand) and then its scalars' words."""
    for _, (off, sm, sn) in extras:
        words += [off, sm, sn]
    for x, ct in zip(scal, sct):
        words.append(f32_word(x) if ct == "f32" else int(x))
    return words


def _collapse(view, shape):
    """(offset, m stride, n stride) reading `view` broadcast to `shape` (..., N) as a 2-D
    (prod(shape[:-1]), N) matrix, or None when its leading dims do not collapse."""
    buf, vshape, vstrides, offset, dtype = view
    t = Tensor._make(Storage(buf, buf.size, None), vshape, vstrides, offset, dtype)
    st = vstrides if vshape == shape else broadcast_strides(t, shape)
    lead = [(d, s) for d, s in zip(shape[:-1], st[:-1]) if d != 1]
    for (d0, s0), (d1, s1) in zip(lead, lead[1:]):
        if s0 != s1 * d1:
            return None
    return offset, (lead[-1][1] if lead else 0), st[-1]


def _contiguous(shape, strides):
    acc = 1
    for d, s in zip(reversed(shape), reversed(strides)):
        if d != 1 and s != acc:
            return False
        acc *= d
    return True


def _command(expr, ins, cts, out, oct_, scal, sct):
    """map_command over views rebuilt from (buffer, shape, strides, offset, dtype)."""
    stores = {}

    def view(v):
        buf, shape, strides, offset, dtype = v
        st = stores.get(id(buf))
        if st is None:
            st = stores[id(buf)] = Storage(buf, buf.size, None)
        return Tensor._make(st, shape, strides, offset, dtype)

    return map_command(expr, [view(v) for v in ins], cts, view(out), oct_, scal, sct)
