"""Integer value ranges across a compiled function's calls (ops/ranges.py says what a range is).

A trace records, beside its commands, the expression of every range its ops noted and what the
index checks that passed on a known range needed (`Tape.ranges`, `Tape.range_needs`). Here they
become, per recording (`Ranges`):
- a guard: each need, evaluated against this call's ranges of the arguments (and of the outside
  tensors the checks read), must hold, so the replay skips exactly the checks eager code would
  pass; gpt-fast's `input_pos` moving one position a token keeps replaying one recording. An
  argument whose range is not known now is read back (one round trip for all of them: the check
  eager code would make), so a need never holds on a guess.
- what a replay leaves: the ranges of the buffers the caller sees again (outputs, arguments
  written, outside tensors written) evaluated from the same call's ranges, so the tokens a
  compiled decode step returns index the next step without a readback, and an outside tensor the
  recording wrote keeps no range from the trace (each replay sets or forgets it).
"""

from __future__ import annotations

from ..ops import ranges


class Call:
    """One call's ranges of its arguments (`leaves`), read once however many recordings ask."""

    def __init__(self, leaves):
        self.leaves = leaves
        self.entries = {}  # argument number -> its storage's bounds entry as the call began
        self.read = {}  # argument number -> (lo, hi) read back this call
        self.outside = {}  # id(buffer) -> bounds entry of an outside tensor as the call began

    def entry(self, i):
        if i not in self.entries:
            t = self.leaves[i]
            st = t._storage
            self.entries[i] = None if st.pool is None else st.pool.bounds.get(id(st.buffer))
        return self.entries[i]

    def arg(self, i):
        """(lo, hi) of argument i (what was read back, else its known range), or None."""
        r = self.read.get(i)
        if r is not None:
            return r
        e = self.entry(i)
        return None if e is None else e[:2]

    def read_back(self, numbers, known_too=False) -> bool:
        """Read the min and max of the int arguments `numbers` whose range is not known (with
        `known_too`, of those whose known range is only wider): one readback for all. Whether
        anything was read."""
        todo = [
            i
            for i in numbers
            if (known_too or self.entry(i) is None)
            and i not in self.read
            and self.leaves[i].dtype.kind == "i"
            and self.leaves[i].numel()
        ]
        if todo:
            from ..ops.indexing import minmax_many

            for i, r in zip(todo, minmax_many([self.leaves[i] for i in todo])):
                self.read[i] = r
        return bool(todo)

    def outside_entry(self, bid, pool):
        if bid not in self.outside:
            self.outside[bid] = pool.bounds.get(bid)
        return self.outside[bid]


class Ranges:
    """A recording's needs and the expressions of what it leaves (the module docstring)."""

    def __init__(self, tape, slots, finals):
        """`finals`: the buffers whose range a replay must set afterwards (written arguments'
        slots, the recording's own outputs, outside buffers it writes)."""
        self.pool = tape.pool
        self.arg_of = {id(s._storage.buffer): i for i, s in enumerate(slots)}
        self.needs = []
        self.finals = [(b, ranges.expr_now(tape, b)) for b in finals]
        self.need_args = []  # the arguments the needs read (read back when not known)
        self.outside = []  # the outside buffers the needs and the finals read
        self.add_needs(tape)

    def add_needs(self, tape):
        """The needs `tape` recorded too (a compiled module's backward, checked with its
        forward)."""
        self.needs += tape.range_needs.values()
        leaves = _leaves(n[0] for n in self.needs)
        self.need_args = sorted({self.arg_of[k] for k in leaves if k in self.arg_of})
        leaves += _leaves(e for _, e in self.finals if e is not None)
        self.outside = [k for k in dict.fromkeys(leaves) if k not in self.arg_of]

    def _leaf(self, call):
        pool = self.pool

        def leaf(bid):
            i = self.arg_of.get(bid)
            if i is not None:
                return call.arg(i)
            e = call.outside_entry(bid, pool)
            return None if e is None else e[:2]

        return leaf

    def holds(self, call) -> bool:
        """Whether every need holds for this call. An argument whose range is not known is read
        back first; where a known range is too wide for a need, the arguments' exact ranges are
        read back and the needs tried again (eager code would read them back there too)."""
        if not self.needs:
            return True
        call.read_back(self.need_args)
        for bid in self.outside:  # (as the call begins: a replay may write them)
            call.outside_entry(bid, self.pool)
        if self._met(call):
            return True
        return call.read_back(self.need_args, known_too=True) and self._met(call)

    def _met(self, call) -> bool:
        leaf, memo = self._leaf(call), {}
        for need in self.needs:
            if need[-1] == "exact":
                e, hit, _ = need
                if call.outside_entry(e[1], self.pool) != hit:
                    return False
                continue
            e, lo, hi = need
            r = ranges.evaluate(e, leaf, memo)
            if r is None or r[0] < lo or r[1] > hi:
                return False
        return True

    def enter(self, call, slots):
        """The slots hold this call's arguments: their ranges (a rerun's Python reads them)."""
        bounds = self.pool.bounds
        for i, s in enumerate(slots):
            if s.dtype.kind != "i":
                continue
            r = call.arg(i)
            if r is None:
                bounds.pop(id(s._storage.buffer), None)
            else:
                bounds[id(s._storage.buffer)] = (r[0], r[1], -1)

    def settle(self, call):
        """After a replay (no Python ran): the ranges its kept buffers hold now."""
        leaf, memo = self._leaf(call), {}
        got = [None if e is None else ranges.evaluate(e, leaf, memo) for _, e in self.finals]
        bounds = self.pool.bounds
        for (b, _), r in zip(self.finals, got):
            if r is None:
                bounds.pop(id(b), None)
            else:
                bounds[id(b)] = (r[0], r[1], -1)


def _leaves(exprs):
    """Buffer ids of the leaves under `exprs`."""
    seen, out, stack = set(), [], list(exprs)
    while stack:
        e = stack.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        if e[0] == "leaf":
            if e[1] not in out:
                out.append(e[1])
        elif e[0] == "f":
            stack.extend(e[2])
    return out


def carry(src, dst) -> None:
    """`dst` is a fresh copy of the words `src` reaches: src's range holds for it."""
    pool = src._storage.pool
    hit = None if pool is None else pool.bounds.get(id(src._storage.buffer))
    if hit is not None:
        pool.bounds[id(dst._storage.buffer)] = (hit[0], hit[1], -1)


def carry_into(slot, t, old) -> None:
    """The argument `t` was just given its slot's values (a copy the range rules did not see):
    the slot's range, joined with `old` (t's storage's entry as the call began) where t is not
    its whole storage; none where either is unknown."""
    pool = t._storage.pool
    if pool is None:
        return
    hit = pool.bounds.get(id(slot._storage.buffer))
    bid = id(t._storage.buffer)
    if hit is not None and not ranges.covers(t):
        hit = None if old is None else (min(hit[0], old[0]), max(hit[1], old[1]))
    if hit is None:
        pool.bounds.pop(bid, None)
    else:
        pool.bounds[bid] = (hit[0], hit[1], -1)
