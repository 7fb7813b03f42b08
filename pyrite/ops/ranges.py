"""Value ranges of integer tensors known without a readback, and what `pr.compile` makes of them.

An index tensor's range must be checked before a gather reads through it (ops/indexing.py).
Reading its min and max back stalls the queue (a decode step's positions would cost a round trip
each token, and a graph break under `pr.compile`), so the pool remembers, per buffer, a range
[lo, hi] holding every element of the buffer's storage (backend/pool.py `bounds`, read through
`known`) wherever one is known for free:
- set by an upload (its exact min and max) or by a kernel whose outputs lie in a range by
  construction (arange, randint, argmax, sort's and topk's indices, multinomial's draws);
- carried by the ops that make new integers from bounded ones (`settle`; ops/range_rules.py):
  copies, casts to another int dtype, cat, gathers, `+ - *` and `neg abs` with Python ints and
  with other bounded tensors, `// % fmod`, clamp, `where`, min/max reductions, sort's and
  topk's values, sums and cumsums (n terms: an int sum known to fit skips its overflow
  readback), casts from bool ([0, 1]); in place too (`pos += 1`). Views share their storage's
  range (`expand`, `view`, slicing).
- forgotten by any write to the buffer (backend/device.py pops it before the kernel runs), so
  an op that cannot know its result's range (a scatter, a float cast, an overflow) leaves none.

A range must stay a true bound: every rule computes the exact range of the mathematical result
(Python ints) and drops it (`_checked`) when it leaves the result dtype (int32 arithmetic wraps,
small ints wrap on store), so an overflow leaves no range rather than a wrong one. An op writing
only part of a storage (a view, `out=` a slice) keeps the union of the old range and the new,
or none where the old one was not known.

Under `pr.compile` a replay runs no Python, so no op notes a range. While a trace records, every
range noted also gets an *expression* (on the tape, `Tape.ranges`): a constant, a *leaf* (an
argument's or another outside tensor's range when the call begins) or a rule over other
expressions. An index check that passed on a known range records what it needed
(`Tape.range_needs`: the expression within [lo, hi]). compile/_ranges.py evaluates these at each
call against the arguments' ranges then, so a recording replays while its checks would pass
(gpt-fast's `input_pos` moving each token), and the ranges the trace's ops gave its outputs are
evaluated for the replay's outputs too.
"""

from __future__ import annotations

I32_MIN, I32_MAX = -(1 << 31), (1 << 31) - 1
_ANY = ("c", I32_MIN, I32_MAX)  # the expression of a range nothing is known of
_OPAQUE = ("?",)  # a range the trace knew that no replay can (never holds)


# ---- the pool's ranges, and their expressions while a trace records --------------------------
def _recording(pool):
    tape = pool.tape
    return tape if tape is not None and tape.recording else None


def known(t):
    """(lo, hi, expression) holding every element of `t` (any view of a bounded storage), or
    None. The expression is None outside a trace."""
    st = t._storage
    pool = st.pool
    if pool is None:
        return None
    hit = pool.bounds.get(id(st.buffer))
    if hit is None:
        return None
    tape = _recording(pool)
    return (hit[0], hit[1], None if tape is None else _expr(tape, st.buffer, hit))


def _expr(tape, buffer, hit):
    i = id(buffer)
    r = tape.ranges.get(i)
    if r is not None and r[0] is hit:  # (noted while this tape records, not written since)
        return r[1]
    if i in tape.owned or i in tape.borrowed:
        # (every range this tape's own buffers get is noted with one; a borrowed buffer, a
        # compiled module's forward's, holds each replay's values, never the trace's: the
        # expressions its forward noted are lent with it, compile/_aot.py)
        return _OPAQUE
    return ("leaf", i)  # a tensor from before the call: its range when the call begins


def known_bounds(t):
    """(lo, hi) holding every element of `t`, or None."""
    k = known(t)
    return None if k is None else k[:2]


def note(t, lo: int, hi: int, exact: bool = False, expr=None) -> None:
    """Record that every element of `t`'s storage lies in [lo, hi] (`t` is the whole storage
    or the rest of it is known to as well); `exact`: lo and hi are the min and max of `t`'s
    elements, which are the whole storage. `expr`: how a replay finds the range again (None: a
    constant, the same every call)."""
    st = t._storage
    pool = st.pool
    if pool is None:
        return
    entry = (lo, hi, t.numel() if exact else -1)
    pool.bounds[id(st.buffer)] = entry
    tape = _recording(pool)
    if tape is not None:
        tape.ranges[id(st.buffer)] = (entry, ("c", lo, hi) if expr is None else expr)


def note_read(t, lo: int, hi: int) -> None:
    """`t`'s min and max were just read back: keep them as its range where `t` is its whole
    storage (a second check of it reads nothing). Not in a trace: no replay reads them again."""
    st = t._storage
    pool = st.pool
    if pool is None or _recording(pool) is not None or not covers(t):
        return
    pool.bounds[id(st.buffer)] = (lo, hi, t.numel())


def note_leaf(tape, t, lo: int, hi: int) -> None:
    """A compiled function's argument slot `t` holds the argument's range (compile/_ranges.py):
    its expression is the leaf evaluated from each call's argument."""
    entry = (lo, hi, -1)
    t._storage.pool.bounds[id(t._storage.buffer)] = entry
    tape.ranges[id(t._storage.buffer)] = (entry, ("leaf", id(t._storage.buffer)))


def expr_now(tape, buffer):
    """The expression of the range `buffer` holds now in the trace `tape` (None: no range)."""
    hit = tape.pool.bounds.get(id(buffer))
    return None if hit is None else _expr(tape, buffer, hit)


def const(lo: int, hi: int):
    """A handle (as `known` gives) for a range known to the host (a Python number)."""
    return (lo, hi, ("c", lo, hi))


def known_or_any(t, k=None):
    """`known(t)` (or `k`, taken earlier), else the handle of the whole int32 range (what a
    kernel may load from words nobody bounded): for rules whose result is bounded whatever the
    input (clamp, x % n)."""
    if k is None:
        k = known(t)
    return k if k is not None else (I32_MIN, I32_MAX, _ANY)


def covers(t) -> bool:
    """Whether `t` is every element of its storage."""
    return (
        t._offset == 0
        and t.numel() * t.dtype.storage_bytes >= t._storage.nbytes
        and t.is_contiguous()
    )


def _union(a, b):
    if a is None or b is None:
        return None
    return (min(a[0], b[0]), max(a[1], b[1]))


def _fits(r, dt):
    """r, or None where it leaves `dt` (an overflow wrapped it) or says nothing (the whole
    int32 range)."""
    if r is None or r[0] < dt.min or r[1] > dt.max or (r[0] <= I32_MIN and r[1] >= I32_MAX):
        return None
    return r


def _checked(fn, dt):
    """fn, answering what `_fits` lets through (what a replay evaluates: ops/ranges.settle's
    own check, as an expression)."""

    def checked(*ranges):
        return _fits(fn(*ranges), dt)

    return checked


def _partial(fn):
    def joined(old, *ranges):
        return _union(old, fn(*ranges))

    return joined


FRESH = object()


def settle(out, fn, *handles, before=FRESH):
    """After a kernel wrote `out` (an int tensor): note on its storage the range fn(*ranges)
    gives, ranges from `handles` (`known` or `const`; any None: no range). `before`: out's own
    handle taken before the kernel ran, for an `out` that was not a fresh tensor; where out is
    not its whole storage the range kept is the union of both (none where `before` is None)."""
    dt = out.dtype
    if dt.kind != "i":
        return
    pool = out._storage.pool
    if pool is None or None in handles:
        return
    partial = before is not FRESH and not covers(out)
    if partial and before is None:
        return
    r = _fits(fn(*handles), dt)  # (a handle is (lo, hi, expression): rules read [0] and [1])
    if partial:
        r = _union(before, r)
    if r is None:
        return
    expr = None
    if _recording(pool) is not None:
        exprs = tuple(_OPAQUE if h[2] is None else h[2] for h in handles)
        fn = _checked(fn, dt)
        if partial:
            fn, exprs = _partial(fn), (before[2] or _OPAQUE, *exprs)
        if any(e[0] != "c" for e in exprs):
            expr = ("f", fn, exprs)
    note(out, r[0], r[1], expr=expr)


def const_rule(v: int):
    """The rule of a fill with the Python int `v`."""
    return lambda: (v, v)


def keep(out, *sources, before=FRESH):
    """`out` holds elements of `sources` (a copy, a cat, a gather, a min/max): their range."""
    if not sources:
        return out
    settle(out, hull, *(known(s) for s in sources), before=before)
    return out


def hull(*ranges):
    """The rule of a result made of elements of its operands (a copy, a cat, a fill of some)."""
    return (min(r[0] for r in ranges), max(r[1] for r in ranges))


def note_indices(idx, source, n: int):
    """Record that `idx` holds indices in [0, n) (an argmax's, a sort's, over n elements of
    `source`), unless it shares `source`'s storage (the range belongs to the whole buffer)."""
    if idx._storage is not source._storage:
        note(idx, 0, max(n - 1, 0))
    return idx


# ---- what checks that passed needed --------------------------------------------------------
def within(t, lo: int, hi: int) -> bool:
    """Whether `t` is known to lie in [lo, hi] without a readback. While a trace records, a
    `True` is remembered as a need the trace's replays must meet too."""
    k = known(t)
    if k is None or k[0] < lo or k[1] > hi:
        return False
    e = k[2]
    if e is not None and e[0] != "c":
        tape = _recording(t._storage.pool)
        tape.range_needs.setdefault((_key(e), lo, hi), (e, lo, hi))
    return True


def _key(e):
    return ("leaf", e[1]) if e[0] == "leaf" else id(e)


def exact_minmax(t):
    """(min, max) of `t` when they are known exactly without a readback, else None (while a
    trace records: only where a replay can know them too)."""
    st = t._storage
    pool = st.pool
    hit = None if pool is None else pool.bounds.get(id(st.buffer))
    if hit is None or hit[2] != t.numel() or t._offset or not t.is_contiguous():
        return None
    tape = _recording(pool)
    if tape is not None:
        e = _expr(tape, st.buffer, hit)
        if e[0] == "leaf":  # an outside tensor: a replay needs the very same range
            tape.range_needs.setdefault((_key(e), "exact"), (e, hit, "exact"))
        elif e[0] != "c":
            return None
    return hit[:2]


def evaluate(expr, leaf, memo: dict):
    """The range `expr` gives, leaves from `leaf(buffer id)` ((lo, hi) or None); `memo`
    (expression id -> range) is shared across one call's evaluations. No recursion: a loop of
    `pos += 1` in a trace makes a chain as long as the loop."""
    stack = [expr]
    while stack:
        e = stack[-1]
        k = id(e)
        if k in memo:
            stack.pop()
            continue
        kind = e[0]
        if kind == "f":
            waiting = [c for c in e[2] if id(c) not in memo]
            if waiting:
                stack.extend(waiting)
                continue
            args = [memo[id(c)] for c in e[2]]
            memo[k] = None if any(a is None for a in args) else e[1](*args)
        elif kind == "c":
            memo[k] = (e[1], e[2])
        elif kind == "leaf":
            memo[k] = leaf(e[1])
        else:
            memo[k] = None
        stack.pop()
    return memo[id(expr)]
