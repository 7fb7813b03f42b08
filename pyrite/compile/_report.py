"""What a compiled function holds, for people: `step.graph` (printable) and `step.stats()`."""

from __future__ import annotations


def _categories(v) -> dict:
    """id(buffer) -> its category: input (an argument's slot), external (parameters and other
    tensors made before the trace), held (made by the trace and still held by a tensor:
    gradients, optimizer state, outputs), intermediate (made and dropped by the trace)."""
    tape = v.graph.tape
    pins = tape.pool.pins
    slots = {id(s._storage.buffer) for s in v.slots}
    cat = {}
    for i in tape.external:
        cat[i] = "external"
    for i, b in tape.owned.items():
        if i in slots:
            cat[i] = "input"
        else:
            pin = pins.get(i)
            cat[i] = "intermediate" if pin is not None and pin.dead else "held"
    return cat


def _bytes_by(v) -> dict:
    tape = v.graph.tape
    cat = _categories(v)
    out = {"input": 0, "external": 0, "held": 0, "intermediate": 0}
    for i, b in (*tape.owned.items(), *tape.external.items()):
        out[cat[i]] += b.size
    return out


class GraphView:
    """The recording as a table: one line a command, its buffers by category."""

    def __init__(self, variant):
        self.variant = variant

    def __str__(self):
        v = self.variant
        if v.graph is None:
            return "<eager: " + "; ".join(v.reasons) + ">"
        tape = v.graph.tape
        cat = _categories(v)
        short = {"input": "in", "external": "ext", "held": "held", "intermediate": "tmp"}
        names: dict[int, str] = {}

        def name(b):
            i = id(b)
            if i not in names:
                names[i] = f"{short.get(cat.get(i), '?')}{len(names)}"
            return names[i]

        lines = [f"graph: {v.graph.kernels} kernels, {len(tape.ops)} commands"]
        k = 0
        for op in tape.ops:
            if op.kind == "d":
                _, modes, buffers, _, grid = op.args
                args = ", ".join(
                    f"{name(b)}{'*' if m == 'w' else ''}" for b, m in zip(buffers, modes)
                )
                lines.append(f"  {k:4d}  {op.inner:<28.28} {op.outer:<24.24} grid {grid}  ({args})")
                k += 1
            elif op.kind == "c":
                src, _, dst, _, n = op.args
                lines.append(f"        copy {n} B {name(src)} -> {name(dst)}")
            elif op.kind == "r" and op.args[1] == "cut":
                lines.append("        -- cut: a rerun submits what came before --")
            elif op.kind == "r":
                lines.append(f"        -- graph break: {op.outer} reads back at {op.where} --")
            else:
                lines.append(f"        upload {len(op.args[2])} B -> {name(op.args[0])}")
        by = _bytes_by(v)
        lines.append(
            "buffers: "
            + ", ".join(f"{k} {n / 1024:.1f} KiB" for k, n in by.items())
            + "  (* written)"
        )
        return "\n".join(lines)

    __repr__ = __str__


def stats(cf) -> dict:
    v = cf._last
    out = {
        "traces": cf.traces,
        "recordings": sum(1 for vs in cf._variants.values() for x in vs if x.graph is not None),
        "eager_calls": cf.eager_calls,
        # why recordings run eagerly, and the graph breaks recordings keep (rerun every call)
        "graph_breaks": [r for vs in cf._variants.values() for x in vs for r in x.reasons]
        + [
            f"{what} (at {where})"
            for vs in cf._variants.values()
            for x in vs
            if x.graph is not None
            for what, where in x.graph.tape.soft
        ],
    }
    if v is None or v.graph is None:
        return out
    tape = v.graph.tape
    by = _bytes_by(v)
    out.update(
        kernels=v.graph.kernels,
        copies=sum(op.kind == "c" for op in tape.ops),
        uploads=sum(op.kind == "u" for op in tape.ops),
        kernels_traced=v.kernels_traced,  # (before fusion and dead-code removal)
        fused=v.fused,  # maps fused into the map that reads them
        folded=tape.folded,  # commands constant folding took out
        common=tape.common,  # common subexpressions taken out
        pipelines=len({id(p) for p in v.graph.pipelines}),
        regions=len(tape.regions),
        replays=v.replays,
        # "replay" or "rerun" (graph breaks, changing Python numbers: its Python runs again over
        # the recording), the reruns, and those that went another way than the trace
        mode=v.mode,
        segments=len(v.graph.cuts) - 1,  # (between graph breaks and cuts: backend/replay.py)
        reruns=v.reruns,
        divergences=v.divergences,
        # what the trace allocated, each allocation counted (no reuse), against the buffers the
        # recording holds for itself (intermediates sharing memory where lifetimes do not overlap)
        unplanned_bytes=tape.allocated_bytes,
        planned_bytes=by["intermediate"] + by["held"] + by["input"],
        bytes=by,
        build_ms=round(v.build_s * 1e3, 2),
    )
    return out
