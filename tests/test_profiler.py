"""pr.profiler (torch.profiler's profile / record_function / key_averages().table): every kernel
of the code inside is an event with its op, kernel family and device time; results are what
they are unprofiled; the exports are well formed; the device is itself again afterwards."""

from __future__ import annotations

import json

import numpy as np
import pytest

import pyrite as pr
import pyrite.nn as nn
import pyrite.nn.functional as F
from pyrite import backend, profiler


def _model():
    pr.manual_seed(0)
    return nn.Sequential(nn.Linear(24, 40), nn.GELU(), nn.LayerNorm(40), nn.Linear(40, 7))


def _data(rng):
    x = pr.tensor(rng.standard_normal((13, 24)).astype(np.float32))
    return x, pr.tensor(rng.integers(0, 7, 13))


def test_events_name_ops_and_results_are_unchanged(rng):
    m = _model()
    x, y = _data(rng)
    want = m(x).numpy()
    dev = backend.current()
    from pyrite.ops import core

    d0 = dev.dispatches
    with profiler.profile(activities=[profiler.ProfilerActivity.CPU]) as prof:
        out = m(x)
        loss = F.cross_entropy(out, y)
        loss.backward()
    kernels = dev.dispatches - d0
    np.testing.assert_array_equal(out.numpy(), want)
    events = prof.events()
    assert len(events) == kernels  # (one event a kernel; POISON fills included)
    names = {e.name for e in events}
    assert {"Linear.forward", "GELU.forward", "LayerNorm.forward"} <= names
    assert {"linearBackward", "layer_normBackward"} <= names
    assert all(e.device_ns >= 0 for e in events) and prof.device_time_total() > 0
    assert prof.exact == ("timestamp-query" in dev.features)
    starts = [e.start_ns for e in events]
    assert min(starts) == 0
    if not core.POISON:
        assert {e.kernel for e in events} >= {"gemm", "run_map"}
    # the device is itself again: the C path back, no instance override left
    assert "dispatch" not in vars(dev)
    np.testing.assert_array_equal(m(x).numpy(), want)


def test_table_labels_and_grouping(rng):
    m = _model()
    x, y = _data(rng)
    with profiler.profile() as prof:
        with profiler.record_function("forward"):
            loss = F.cross_entropy(m(x), y)
        loss.backward()
    avgs = prof.key_averages()
    rows = {str(a.key): a for a in avgs}
    assert "[forward]" in rows
    fwd = [e for e in prof.events() if "forward" in e.labels]
    assert rows["[forward]"].count == len(fwd) > 0
    table = avgs.table(sort_by="device_time_total", row_limit=4)
    lines = table.splitlines()
    assert lines[0].split()[0] == "Name" and "Device total" in lines[0]
    assert len(lines) == 2 + 4 + 2
    # rows sorted by device time, largest first
    op_rows = sorted(
        (a for a in avgs if not str(a.key).startswith("[")), key=lambda a: -a.device_time_total
    )
    assert sum(a.count for a in op_rows) == len(prof.events())
    by_kernel = prof.key_averages(group_by="kernel")
    assert sum(a.count for a in by_kernel if not str(a.key).startswith("[")) == len(prof.events())
    with pytest.raises(ValueError, match="sort_by"):
        avgs.table(sort_by="flops")
    with pytest.raises(ValueError, match="group_by"):
        prof.key_averages(group_by="shape")


def test_chrome_trace_and_timeline(rng, tmp_path):
    m = _model()
    x, _ = _data(rng)
    with profiler.profile() as prof:
        with profiler.record_function("model"):
            m(x)
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())["traceEvents"]
    spans = [e for e in trace if e["ph"] == "X"]
    assert len(spans) == len(prof.events()) + 1  # (the kernels and the one label range)
    assert all(e["dur"] > 0 and e["ts"] >= 0 for e in spans)
    png = tmp_path / "timeline.png"
    prof.export_timeline(str(png))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["timeline.png", "trace.json"]


def test_compiled_replay_is_one_event_and_capacity_rolls_over(rng, monkeypatch):
    x = pr.tensor(rng.standard_normal((9, 5)).astype(np.float32))
    c = pr.compile(lambda a: (a * 2 + 1).sum())
    for _ in range(3):
        c(x)
    monkeypatch.setattr(profiler, "CAPACITY", 4)  # (the query set fills: read, start over)
    with profiler.profile() as prof:
        got = c(x)
        y = x
        for _ in range(11):
            y = y * 1.5
    replays = [e for e in prof.events() if e.kernel == "pr.compile replay"]
    assert len(replays) == 1
    assert len([e for e in prof.events() if e.name == "Tensor.__mul__"]) >= 11
    np.testing.assert_allclose(got.item(), float((x.numpy() * 2 + 1).sum()), rtol=1e-5)
    np.testing.assert_allclose(y.numpy(), x.numpy() * 1.5**11, rtol=1e-5)


def test_wall_time_without_timestamp_queries(rng, monkeypatch):
    dev = backend.current()
    monkeypatch.setattr(dev, "features", set(dev.features) - {"timestamp-query"})
    x, _ = _data(rng)
    with profiler.profile() as prof:
        z = x * 3
    assert not prof.exact and len(prof.events()) >= 1
    assert all(e.device_ns > 0 for e in prof.events())
    np.testing.assert_array_equal(z.numpy(), x.numpy() * 3)


def test_schedule_steps_and_tensorboard_handler(rng, tmp_path):
    """torch's schedule: wait 1, warm up 1, record 2, twice: steps 2-3 and 6-7 are recorded,
    each window handed to on_trace_ready (here tensorboard_trace_handler's files) when its
    last step ends; each recorded step ran its four maps' kernels."""
    x = pr.tensor(rng.standard_normal((6, 5)).astype(np.float32))
    sched = profiler.schedule(wait=1, warmup=1, active=2, repeat=2)
    actions = [sched(k) for k in range(9)]
    A = profiler.ProfilerAction
    assert actions == [A.NONE, A.WARMUP, A.RECORD, A.RECORD_AND_SAVE] * 2 + [A.NONE]
    seen = []
    handler = profiler.tensorboard_trace_handler(str(tmp_path / "tb"), worker_name="w")

    def ready(prof):
        seen.append(len(prof.events()))
        handler(prof)

    from pyrite.ops import core

    per_step = 4 * (2 if core.POISON else 1)  # (x * 2, + 1, * 3, relu; each poisoned first)
    with profiler.profile(schedule=sched, on_trace_ready=ready) as prof:
        for _ in range(9):
            ((x * 2 + 1) * 3).relu()
            prof.step()
    assert seen == [2 * per_step, 2 * per_step]
    files = sorted((tmp_path / "tb").glob("w.*.pt.trace.json"))
    assert len(files) == 2 and all(json.loads(f.read_text())["traceEvents"] for f in files)


def test_misuse_is_refused():
    with pytest.raises(TypeError, match="schedule"):
        profiler.profile(schedule=object())
    with profiler.profile():
        with pytest.raises(RuntimeError, match="already recording"):
            with profiler.profile():
                pass
