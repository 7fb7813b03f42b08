#!/usr/bin/env bash
# Session 34's second device run: the operators' bound plans on and off (both implementations),
# the SASS probe again (now trying the shader cache's entries as compressed streams), the
# overhead and latency rows of pyrite bench. Each step time-limited.
#   run(command="bash scripts/gpu_s34b.sh", carry=[".gl", ".whl"])
# shellcheck disable=SC1091
OUT=${OUT:-$(mktemp -d)}
export OUT
start=$(date +%s)
step() {  # name, limit in s, command...
  local name=$1 limit=$2
  shift 2
  echo "== $name (at $(($(date +%s) - start)) s)" | tee -a "$OUT/session.txt"
  timeout "$limit" "$@" 2>&1 | tr '\r' '\n' | grep -v '^\s*$' | tail -n 40 | tee -a "$OUT/session.txt"
}
source scripts/h200_prelude.sh >/dev/null
step bound-wgpu 60 env PYRITE_BACKEND=wgpu python3 scripts/bound_ab.py
step bound-dawn 60 env PYRITE_BACKEND=dawn python3 scripts/bound_ab.py
step sass 100 bash scripts/sass_probe.sh gemm qgemv4 half_acc16
step bench-wgpu 120 env PYRITE_BACKEND=wgpu python3 -m pyrite bench --only overhead,latency \
  --json "$OUT/bench-wgpu.json"
