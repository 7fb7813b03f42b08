"""Every kernel this test session built, compiled by Dawn's WGSL compiler (Tint) as well: the
suite runs on lavapipe through wgpu-native (naga), and Tint is stricter in places (uniformity,
const-evaluated NaN and inf: kernels/common.py's `p_nan`), so a kernel naga takes may be one Dawn
refuses on a GPU. Dawn's Null backend compiles without a GPU (tests/tint_compile.py). Named to
run last, so it sees the kernels of the whole session; alone, it builds its own handful first.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import pyrite as pr

HERE = Path(__file__).parent


def _tint(sources, tmp_path):
    path = tmp_path / "sources.json"
    path.write_text(json.dumps(sources))
    run = subprocess.run(
        [sys.executable, str(HERE / "tint_compile.py"), str(path)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if run.returncode != 0 and "Null" in run.stderr and "adapter" in run.stderr.lower():
        pytest.skip(f"this Dawn build has no Null backend: {run.stderr[-300:]}")
    assert run.returncode == 0, run.stderr[-2000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_tint_refuses_a_bad_kernel(tmp_path):
    # the harness sees Tint's refusals: a barrier under a branch on the invocation, and a NaN
    # made by a const-evaluated bitcast
    bad = [
        "@compute @workgroup_size(64) fn main(@builtin(local_invocation_id) l: vec3<u32>) "
        "{ if (l.x == 0u) { workgroupBarrier(); } }",
        "@group(0) @binding(0) var<storage, read_write> o: array<f32>;\n"
        "@compute @workgroup_size(1) fn main() { o[0] = bitcast<f32>(0x7fc00000u); }",
        "@compute @workgroup_size(1) fn main() { }",
    ]
    got = _tint(bad, tmp_path)
    assert [i for i, _ in got["failures"]] == [0, 1], got


def test_every_kernel_built_compiles_in_tint(rng, tmp_path):
    # a few ops of its own (a GEMM, a reduction, a row op, attention, a scan), then every
    # pipeline this process has built
    x = pr.tensor(rng.standard_normal((37, 70)).astype(np.float32))
    w = pr.tensor(rng.standard_normal((50, 70)).astype(np.float32))
    q = pr.tensor(rng.standard_normal((2, 3, 9, 16)).astype(np.float32))
    pr.nn.functional.linear(x, w).softmax(-1).sum(0).cumsum(0).numpy()
    pr.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True).numpy()
    sources = sorted(pr.backend.current()._pipelines)
    got = _tint(sources, tmp_path)
    bad = [(sources[i], msg) for i, msg in got["failures"]]
    assert not bad, f"{len(bad)} of {len(sources)} kernels refused by Tint; the first:\n" + (
        f"{bad[0][1][:3000]}"
    )
