"""Bytecodes and Python calls a call runs, counted by a trace function: the same on every run,
where timings on a shared 2-core host move by 2x (scripts/python_cost.py, bert_host_cost.py)."""

import sys


def opcodes(fn):
    """Bytecodes and Python calls one call of `fn` runs (deterministic, where timings on a shared
    host are not): a trace function counting every opcode event and every call event."""
    counts = {"op": 0, "call": 0}
    per: dict = {}

    def tracer(frame, event, _arg):
        if event == "call":
            counts["call"] += 1
            frame.f_trace_opcodes = True
            key = f"{frame.f_code.co_filename.split('pyrite/')[-1]}:{frame.f_code.co_name}"
            per[key] = per.get(key, 0)
            return _local(key)
        return None

    def _local(key):
        def local(frame, event, _arg):
            if event == "opcode":
                counts["op"] += 1
                per[key] += 1
            return local

        return local

    fn()
    sys.settrace(tracer)
    try:
        fn()
    finally:
        sys.settrace(None)
    return counts, per
