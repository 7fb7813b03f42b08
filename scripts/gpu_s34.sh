#!/usr/bin/env bash
# Session 34's device run: the SASS probe, attention's waves, the decode kernel's review-pass
# WGSL on the GPU, the operators' bound plans in the overhead rows. Each step time-limited.
#   run(command="bash scripts/gpu_s34.sh", carry=[".gl", ".whl"])
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
step sass 230 bash scripts/sass_probe.sh gemm linear_bert attn_bert qgemv4 qgemv8 half_acc16 gemm@dawn
source scripts/h200_prelude.sh >/dev/null
step waves 50 env PYRITE_BACKEND=wgpu python3 scripts/attn_waves.py
step decode-wgpu 45 env PYRITE_BACKEND=wgpu python3 scripts/decode_check.py --calls 50
step decode-dawn 45 env PYRITE_BACKEND=dawn python3 scripts/decode_check.py --calls 50
step overhead-wgpu 60 env PYRITE_BACKEND=wgpu python3 -m pyrite bench --only overhead --json "$OUT/overhead-wgpu.json"
step attn-tests 100 env PYRITE_BACKEND=wgpu python3 -m pytest -q -x -p no:cacheprovider tests/test_attention_fused.py tests/test_bound_ops.py
