#!/usr/bin/env bash
# One device `run` that measures what is still unmeasured on the GPU, most wanted first, each step
# under its own time limit so one slow step cannot lose the others' figures (a run may last
# 600 s). Every step's output goes to $OUT/session.txt (the device returns at most 8 files) and,
# where it writes JSON, $OUT/<step>.json.
#   run(command="bash scripts/gpu_session.sh [step ...]", carry=[".gl", ".whl"])
# Steps: subgroups attention tune half dropout bench-wgpu bench-dawn bert (default: all, in
# that order), and attn-bwd, attn-fwd, attn-bench, rowmap, math, bert-dawn, bench-rows, variants, train, decode,
# trusted, tiles, small, compile-bert, latency-bert, profile, latency-probe, small2, rowops-probe, tiles-bert, attn-sg, chain, batch, batch-dawn, attn-scale, sum4, attn-db, attn-bwd-shfl,
# sass, waves, decode-check, bound, qgemv-probe, qgemv-shapes(-int8), gemm-dbu(-dawn), gemm-dbu2, parity, acc16, gemm-bake, gemm-k16, bench-matmul, gemm-dbub, profile-check, acc16-n768, attn-bench1, host-cost, gemm-88, confirm, tile-profile, big-rule, bert-tile2, tune-ship, scan, scan-lb, scan-unit, scan-next, scan-final, host-ab, s41, new-tests, s42, sass42, gpu-suite, attn-sass, fpe, diag42, attn-wide, attn-wide2, attn-wide-dawn, attn-tests43, attn-gemm3, s44, s45, llama, s46, decode-prof, llama-ab, s47.
# shellcheck disable=SC1091
source scripts/h200_prelude.sh || exit 1
OUT=${OUT:-$(mktemp -d)}
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader | tee "$OUT/session.txt"
steps=${*:-subgroups attention tune half dropout bench-wgpu bench-dawn bert}
start=$(date +%s)
# s41 (session 41): the host A/B on either card, then the H200's unmeasured rows and its tune
# table, or on an H100 scan-final
if [ "$steps" = s41 ]; then
  if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
    steps="host-ab tune-ship bert bench-rows"
  else
    steps="host-ab scan-final"
  fi
fi
# s42 (session 42): the SASS of the f16-arithmetic and f32 big tiles (zstandard now in .whl/),
# then on an H200 its tune table and bandwidth rows, on an H100 session 41's new tests
if [ "$steps" = s42 ]; then
  if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
    steps="sass42 tune-ship bench-rows"
  else
    steps="sass42 new-tests"
  fi
fi
# s44 (session 44): the attention tests on this GPU (session 43's two-part log-sum-exp and the
# backward with dk, dv by GEMMs were tested only on lavapipe), the backward's A/B with each
# dispatch's time, then the attention tests through Dawn
if [ "$steps" = s44 ]; then
  steps="attn-tests44 attn-gemm3-ab attn-tests44-dawn"
fi
# s45 (session 45, little device time left): s44's A/B first, then its wgpu-native tests
if [ "$steps" = s45 ]; then
  steps="attn-gemm3-ab attn-tests44"
  STEP_LOGS=1
fi
# s46 (session 46): the backward's A/B, Llama generation at TinyLlama's shape (f32, int4, int8),
# then the attention tests on wgpu-native; each step's log under $OUT as it runs
if [ "$steps" = s46 ]; then
  steps="attn-gemm3-ab llama attn-tests44"
  STEP_LOGS=1
fi
# s47 (session 47): the compiled decoding with and without maps fused into the GEMVs (f32,
# int4), then where a decoded token's time goes (TinyLlama's shape), then on an H200 the tune
# table pyrite/data still lacks for it
if [ "$steps" = s47 ]; then
  if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
    steps="llama-ab decode-prof tune-ship"
  else
    steps="llama-ab decode-prof"
  fi
  STEP_LOGS=1
fi

step() {  # name, limit in s, command...
  local name=$1 limit=$2
  shift 2
  local log
  # (under $OUT, so a run cut off mid-step still brings back what the step printed so far)
  log=$(if [ -n "$STEP_LOGS" ]; then echo "$OUT/log-$name.txt"; else mktemp; fi)
  echo "== $name (limit ${limit}s, at $(($(date +%s) - start)) s)" | tee -a "$OUT/session.txt"
  timeout "$limit" "$@" >"$log" 2>&1
  echo "   rc $? after $(($(date +%s) - start)) s" | tee -a "$OUT/session.txt"
  # (progress bars' carriage returns would make one long line of every update)
  tr '\r' '\n' <"$log" | grep -v -e 'shape/s' -e '^\s*$' | tee -a "$OUT/session.txt" | tail -n 40
}

gemm3_ab() {  # session 44: t2 / dsgemm / gemm3 by GPU time, each dispatch's time printed
  step attn-gemm3 200 env PYRITE_BACKEND=wgpu python3 scripts/attention_bwd_ab.py \
    --variants t2,dsgemm,gemm3 --breakdown \
    --only "BERT-base$|BERT-base batch 1$|512 tokens$|E=128|E=32" --json "$OUT/attn-gemm3.json"
}

for s in $steps; do
  case $s in
    attn-bwd)  # the tiled attention backward: its tests on this GPU (E = 64 runs only here), then A/B
      step attn-tests 240 env PYRITE_BACKEND=wgpu python3 -m pytest -q -x -p no:cacheprovider \
        tests/test_attention_fused.py tests/test_attention_dropout.py
      step attn-bwd 150 env PYRITE_BACKEND=wgpu python3 scripts/attention_bwd_ab.py --json "$OUT/attn-bwd.json" ;;
    rowmap)  # the row ops' variants (held lanes, subgroups, vec4 loads), wgpu-native
      step rowmap 120 env PYRITE_BACKEND=wgpu python3 scripts/rowmap_ab.py --rows ;;
    attn-fwd)  # the forward kernels' A/B (GPU time), wgpu-native
      step attn-fwd 150 env PYRITE_BACKEND=wgpu python3 scripts/attention_ab.py --json "$OUT/attn-fwd.json" ;;
    attn-bench)  # the attention rows of pyrite bench on both implementations
      step attn-bench-wgpu 150 env PYRITE_BACKEND=wgpu python3 -m pyrite bench --only attention \
        --json "$OUT/attn-bench-wgpu.json"
      step attn-bench-dawn 150 env PYRITE_BACKEND=dawn python3 -m pyrite bench --only attention \
        --json "$OUT/attn-bench-dawn.json" ;;
    attn-bench1)  # the attention rows of pyrite bench, wgpu-native only
      step attn-bench-wgpu 200 env PYRITE_BACKEND=wgpu python3 -m pyrite bench --only attention \
        --json "$OUT/attn-bench-wgpu.json" ;;
    host-cost)  # the Python an eager op costs on this host (C recording calls stubbed), then pyrite bench's overhead rows
      step host-cost 60 env PYRITE_BACKEND=wgpu python3 scripts/python_cost.py
      step overhead 90 env PYRITE_BACKEND=wgpu python3 -m pyrite bench --only overhead --json "$OUT/overhead.json" ;;
    host-ab)  # the eager Python an op costs and the overhead chain, this tree against the one in .ab_base/
      # (an untracked copy of an earlier pyrite: carry it), alternating, three times each
      for r in 1 2 3; do
        step host-base-$r 60 env PYRITE_BACKEND=wgpu PYTHONPATH="$PWD/.ab_base:$PYRITE_SITE" \
          python3 .ab_base/scripts/python_cost.py
        step host-new-$r 60 env PYRITE_BACKEND=wgpu python3 scripts/python_cost.py
      done
      for r in 1 2; do
        step overhead-base-$r 90 env PYRITE_BACKEND=wgpu PYTHONPATH="$PWD/.ab_base:$PYRITE_SITE" \
          python3 -m pyrite bench --only overhead
        step overhead-new-$r 90 env PYRITE_BACKEND=wgpu python3 -m pyrite bench --only overhead
      done ;;
    new-tests)  # session 41's new test files on this GPU (written on lavapipe), one pytest a file so a crash hides nothing else
      for f in test_numerics41 test_hunt_scans39 test_complex_breadth41 test_linalg_grads41 \
          test_error_classes41 test_fuzz_spatial41 test_fuzz_index41; do
        [ -f "tests/$f.py" ] || continue
        step "$f" 120 env PYRITE_BACKEND=wgpu python3 -m pytest -q -p no:cacheprovider -rf --tb=line \
          "tests/$f.py"
      done ;;
    gemm-88)  # 256-invocation 128x128 tiles of 8x8 sums with the unconditional prefetch (dbu), f32, wgpu-native
      step gemm-88 120 env PYRITE_BACKEND=wgpu python3 scripts/gemm_tile_ab.py --json "$OUT/gemm-88.json" \
        --shapes "4096,4096,4096;4096,3072,768;4096,768,3072;4096,768,768" \
        --variants "auto;fast 128x128 8x8 k8 dbu;fast 128x128 8x8 k16 dbu;fast 128x128 8x8 k32 dbu;fast 128x64 8x8 k16 dbu;fast 128x128 8x16 k8 dbu" ;;
    confirm)  # the 8x8 k16 tile against the shipped big tile again (twice), BERT batch 32 with each, the recording chain with and without bound plans
      step rec-bound 40 env PYRITE_BACKEND=wgpu python3 scripts/recording_probe.py
      step rec-unbound 40 env PYRITE_BACKEND=wgpu PYRITE_BOUND=0 python3 scripts/recording_probe.py
      for r in 1 2; do
        step gemm-88b-$r 90 env PYRITE_BACKEND=wgpu python3 scripts/gemm_tile_ab.py --json "$OUT/gemm-88b-$r.json" \
          --shapes "4096,4096,4096;4096,3072,768;4096,2304,768" --variants "auto;fast 128x128 8x8 k16 dbu"
      done
      step bert-tile 120 env PYRITE_BACKEND=wgpu python3 scripts/bert_tile_ab.py "128,128,8,8,16,3" ;;
    tile-profile)  # BERT batch 32's kernels with the big tile (8x8 k16 since session 38) and the 16x8 one before it, by grid (pr.profiler, warm)
      step tile-profile 120 env PYRITE_BACKEND=wgpu python3 scripts/bert_tile_ab.py "128,128,16,8,8,3" --min 0 --profile ;;
    big-rule)  # the rule with the 8x8 k16 tile as its big tile (also from 264 tiles) against the rule before session 38 (16x8, wave fill alone), wgpu-native
      step big-rule 200 env PYRITE_BACKEND=wgpu python3 scripts/gemm_tile_ab.py --json "$OUT/big-rule.json" \
        --shapes "4096,4096,4096;4096,3072,768;4096,2304,768;4096,768,3072;4096,768,768;2048,3072,768;8192,768,768;2048,2304,768;1024,4096,4096;3072,1024,1024;2560,1920,768;2560,2560,768;1000,3001,999" \
        --variants "auto;rule 128x128 16x8 k8 dbu min0;rule 128x128 8x8 k16 dbu slots132 min0;fast 128x128 8x8 k16 dbu;fast 64x64 8x8 k16 db" ;;
    bert-tile2)  # BERT batch 32 with the rule as shipped against the one before session 38 (the harness swaps the rule's tables too), then profiled
      step bert-tile2 120 env PYRITE_BACKEND=wgpu python3 scripts/bert_tile_ab.py "128,128,16,8,8,3" --min 0
      SASS_WORKLOADS="gemm_dbu gemm88k16" step sass-big 120 bash scripts/sass_probe.sh gemm_dbu gemm88k16
      step bert-tile2-profile 120 env PYRITE_BACKEND=wgpu python3 scripts/bert_tile_ab.py "128,128,16,8,8,3" --min 0 --profile ;;
    math)  # kernels/mathlib.py's functions compile and hold their accuracy on both implementations
      step math-wgpu 60 env PYRITE_BACKEND=wgpu python3 scripts/math_check.py
      step math-dawn 60 env PYRITE_BACKEND=dawn python3 scripts/math_check.py ;;
    subgroups)  # the subgroup reductions against the trees, both implementations
      step subgroups-wgpu 60 env PYRITE_BACKEND=wgpu python3 scripts/subgroup_ab.py --json "$OUT/subgroups-wgpu.json"
      step subgroups-dawn 60 env PYRITE_BACKEND=dawn python3 scripts/subgroup_ab.py --json "$OUT/subgroups-dawn.json" ;;
    attention)
      step attention 120 env PYRITE_BACKEND=wgpu python3 scripts/attention_ab.py --json "$OUT/attention.json" ;;
    tune)  # BERT batch-1 products with the longer-K-step candidate tiles; keeps nothing
      step tune 110 env PYRITE_BACKEND=wgpu python3 -m pyrite tune --dry-run --reps 10 \
        --shapes 128x768x768:k,128x2304x768:k,128x3072x768:k,128x768x3072:k \
        --json "$OUT/tune.json" ;;
    llama-ab)  # compiled decoding, maps fused into the GEMVs' stores or not (compile/fusion.FUSE_GEMV)
      step llama-ab 240 env PYRITE_BACKEND=wgpu python3 scripts/llama_decode_time.py \
        --formats f32,int4 --ab-fuse-gemv --json "$OUT/llama-ab.json" ;;
    decode-prof)  # the eager decode step's kernels by GPU time, the compiled step's time a token
      step decode-prof 200 env PYRITE_BACKEND=wgpu python3 scripts/llama_decode_profile.py \
        --rows 12 --json "$OUT/decode-prof.json" ;;
    tune-ship)  # pyrite tune's BERT preset, kept in $OUT/tune-cache.json: the table pyrite/data ships for this GPU
      step tune-ship-1 200 env PYRITE_BACKEND=wgpu PYRITE_TUNE_CACHE="$OUT/tune-cache.json" python3 -m pyrite tune \
        --reps 10 --shapes 128x2304x768:k,128x768x768:k,128x3072x768:k,128x768x3072:k
      step tune-ship-2 240 env PYRITE_BACKEND=wgpu PYRITE_TUNE_CACHE="$OUT/tune-cache.json" python3 -m pyrite tune \
        --reps 10 --shapes 4096x2304x768:k,4096x768x768:k,4096x3072x768:k,4096x768x3072:k ;;
    half)
      step half 90 env PYRITE_BACKEND=wgpu python3 scripts/half_gemm_time.py --json "$OUT/half.json" ;;
    dropout)
      step dropout 60 env PYRITE_BACKEND=wgpu python3 scripts/dropout_time.py ;;
    bench-wgpu)
      step bench-wgpu 200 env PYRITE_BACKEND=wgpu python3 -m pyrite bench \
        --only matmul,conv,attention,latency --json "$OUT/bench-wgpu.json" ;;
    bench-matmul)
      step bench-matmul 90 env PYRITE_BACKEND=wgpu python3 -m pyrite bench --only matmul \
        --json "$OUT/bench-matmul.json" ;;
    bench-dawn)
      step bench-dawn 150 env PYRITE_BACKEND=dawn python3 -m pyrite bench \
        --only matmul,conv,attention,latency --json "$OUT/bench-dawn.json" ;;
    bert)
      step bert 120 env PYRITE_BACKEND=wgpu python3 -m pyrite bench --only bert \
        --json "$OUT/bert-wgpu.json" ;;
    variants)  # every fast GEMM tile forced, at 4096^3 and a BERT-base linear (both implementations)
      step variants-wgpu 150 env PYRITE_BACKEND=wgpu python3 -m pyrite.bench.gemm_variants \
        --sizes 4096 --linear 4096,768,3072 --json "$OUT/variants-wgpu.json"
      step variants-dawn 150 env PYRITE_BACKEND=dawn python3 -m pyrite.bench.gemm_variants \
        --sizes 4096 --linear 4096,768,3072 --json "$OUT/variants-dawn.json" ;;
    decode)  # the decode kernel's key ranges, and the quantized GEMV's shapes (one format a process)
      step decode 90 env PYRITE_BACKEND=wgpu python3 scripts/decode_sweep.py --json "$OUT/decode.json"
      step qgemv-int4 120 env PYRITE_BACKEND=wgpu python3 scripts/qgemv_time.py --no-linear --format 4,128
      step qgemv-int8 120 env PYRITE_BACKEND=wgpu python3 scripts/qgemv_time.py --no-linear --format 8 ;;
    train)
      step train 150 env PYRITE_BACKEND=wgpu python3 -m pyrite bench --only train,compile \
        --json "$OUT/train-wgpu.json" ;;
    bert-dawn)
      step bert-dawn 120 env PYRITE_BACKEND=dawn python3 -m pyrite bench --only bert \
        --json "$OUT/bert-dawn.json" ;;
    bench-rows)  # the bandwidth rows (copy, reductions, row ops), wgpu-native
      step bench-rows 150 env PYRITE_BACKEND=wgpu python3 -m pyrite bench \
        --only copy,reduce,rowops --json "$OUT/bench-rows-wgpu.json" ;;
    trusted)  # kernels built with and without run-time index checks (wgpu-native), GPU time
      step trusted 240 env PYRITE_BACKEND=wgpu python3 scripts/trusted_ab.py --json "$OUT/trusted.json" ;;
    tiles)  # every fast GEMM tile forced at BERT-base's linears and 4096^3, GPU time, both implementations
      step tiles-wgpu 200 env PYRITE_BACKEND=wgpu python3 scripts/gemm_tile_ab.py --json "$OUT/tiles-wgpu.json"
      step tiles-dawn 200 env PYRITE_BACKEND=dawn python3 scripts/gemm_tile_ab.py --json "$OUT/tiles-dawn.json" ;;
    small)  # K-group, 96-column and f16-arithmetic GEMM tiles against the rule, both implementations
      step small 420 bash scripts/gemm_small_ab.sh ;;
    compile-bert)  # BERT-base batch 32: eager, compiled, compiled without fusion; fused products alone
      step compile-bert 150 env PYRITE_BACKEND=wgpu python3 scripts/compile_bert_probe.py ;;
    latency-bert)  # pyrite bench's latency, BERT (eager and compiled) and attention rows, both
      step latency-bert 260 bash scripts/latency_bert_bench.sh ;;
    small2)  # small products' tiles with the deep prefetch (db2) against the rule's, wgpu-native
      step small2 150 env PYRITE_BACKEND=wgpu python3 scripts/gemm_tile_ab.py \
        --shapes "128,768,768;128,2304,768;128,3072,768;128,768,3072;512,768,768" \
        --variants "auto;fast 32x32 4x4 k32 db kg4;fast 32x32 4x4 k32 db2 kg4;fast 32x32 4x4 k16 db2 kg2;fast 32x32 4x4 k32 db2 kg2;fast 64x64 4x4 k16 db2;fast 64x64 8x8 k16 db2" \
        --json "$OUT/small2.json" ;;
    tiles-bert)  # the big tiles at BERT-base batch 32's linears beside torch's F.linear, wgpu-native
      step tiles-bert 200 env PYRITE_BACKEND=wgpu python3 scripts/gemm_tile_ab.py \
        --variants "auto;fast 128x128 16x8 k8 db;fast 128x128 16x8 k8 db2;fast 128x128 8x8 k16 db2;fast 128x96 8x12 k16 db;fast 128x96 8x12 k16 db2;fast 64x64 8x8 k16 db;fast 64x64 8x8 k16 db2;fast 128x64 16x8 k16 db2" \
        --json "$OUT/tiles-bert.json" ;;
    attn-sg)  # the tiled forward's subgroup-shuffle rows against workgroup-memory rows, wgpu-native
      step attn-sg 150 env PYRITE_BACKEND=wgpu python3 scripts/attention_ab.py \
        --only "${ATTN_ONLY:-BERT-base$|BERT-base batch 1|512 tokens|causal 4096|GPT bench|E=128, 128|E=32}" \
        --json "$OUT/attn-sg.json" ;;
    batch)  # the eager batch cap (backend/device.py BATCH_DISPATCHES) on issue 9's latency rows, wgpu-native
      # cap/idle: PYRITE_BATCH (the doubling's cap) and PYRITE_BATCH_IDLE (a batch this long goes
      # early when the queue has run dry; 0: never)
      for b in ${BATCH_SETTINGS:-256/0 64/0 32/0 256/16 256/32}; do
        step "batch-${b/\//-}" 70 env PYRITE_BACKEND=wgpu PYRITE_BATCH=${b%/*} PYRITE_BATCH_IDLE=${b#*/} \
          python3 -m pyrite bench --only latency,overhead,bert --json "$OUT/batch-${b/\//-}.json"
      done ;;
    attn-scale)  # the tiled forward at BERT-base's heads over key and query counts: per tile and fixed costs
      step attn-scale 120 env PYRITE_BACKEND=wgpu python3 scripts/attention_ab.py --only "^scale" \
        --kernels tiled --json "$OUT/attn-scale.json" ;;
    attn-db)  # the tiled forward's P by shuffles and double-buffered tiles: its tests forced on, then A/B
      for impl in wgpu dawn; do
        step "attn-db-tests-$impl" 240 env PYRITE_BACKEND=$impl python3 -c "import sys, pytest
from pyrite.kernels import attention_tiled as K
K.P_SHUFFLE = K.DOUBLE_BUFFER = True
sys.exit(pytest.main(['-q', '-x', '-p', 'no:cacheprovider', '-k', 'tiled or dropout',
                      'tests/test_attention_fused.py', 'tests/test_attention_dropout.py']))"
      done
      step attn-db 240 env PYRITE_BACKEND=wgpu python3 scripts/attention_ab.py \
        --only "${ATTN_ONLY:-^BERT-base$|BERT-base batch 1$|512 tokens|causal 4096|E=32|E=128, 128|scale S=(32|128|512)$}" \
        --kernels tiled,tiled-pshfl,tiled-db,tiled-db-r4 --json "$OUT/attn-db.json" ;;
    attn-bwd-shfl)  # the tiled backward's products by shuffles: the attention tests with it forced on, then A/B
      for impl in wgpu dawn; do
        step "attn-bwd-shfl-tests-$impl" 240 env PYRITE_BACKEND=$impl python3 -c "import sys, pytest
from pyrite.kernels import attention_tiled_bwd as KB
KB.P_SHUFFLE = True
sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', 'tests/test_attention_fused.py', 'tests/test_attention_dropout.py']))"
      done
      step attn-bwd-shfl 240 env PYRITE_BACKEND=wgpu python3 scripts/attention_bwd_ab.py \
        --variants t2,dsgemm,t2-shfl,dsgemm-shfl --json "$OUT/attn-bwd-shfl.json" ;;
    sum4)  # the f32 sum's vec4 step (ops/reduce.SUM4) against a TwoSum an element, both implementations
      step sum4-wgpu 60 env PYRITE_BACKEND=wgpu python3 scripts/sum4_ab.py
      step sum4-dawn 60 env PYRITE_BACKEND=dawn python3 scripts/sum4_ab.py ;;
    batch-dawn)  # the same on Dawn: the doubling alone, and with the early submit
      for b in ${BATCH_SETTINGS_DAWN:-256/0 256/16}; do
        step "batch-dawn-${b/\//-}" 70 env PYRITE_BACKEND=dawn PYRITE_BATCH=${b%/*} PYRITE_BATCH_IDLE=${b#*/} \
          python3 -m pyrite bench --only latency,overhead,bert --json "$OUT/batch-dawn-${b/\//-}.json"
      done ;;
    chain)  # the chain of linears as one pass against its dispatches alone, wgpu-native
      step chain 90 env PYRITE_BACKEND=wgpu python3 scripts/gpu_time.py --chain ;;
    rowops-probe)  # BERT batch 32's non-GEMM kernels beside torch's, wgpu-native
      step rowops-probe 120 env PYRITE_BACKEND=wgpu python3 scripts/bert_rowops_probe.py ;;
    profile)  # where BERT-base (batch 1, 32) spends device time, pyrite wgpu-native beside torch's kernels
      step profile 150 env PYRITE_BACKEND=wgpu python3 scripts/profile_models.py "$(mktemp -d)"
      step torch-profile 90 python3 scripts/torch_bert_profile.py ;;
    latency-probe)  # the pieces of a small round trip and of a sum's read (issue 9), wgpu-native
      step latency-probe 90 env PYRITE_BACKEND=wgpu python3 scripts/latency_probe.py
      step dispatch-probe 90 env PYRITE_BACKEND=wgpu python3 scripts/dispatch_probe.py --sum ;;
    gpu-suite)  # the whole test suite on this GPU (written and run in CI on lavapipe), 12 workers
      # (pytest-xdist): every failure's line in $OUT/suite.txt; SUITE_FILES narrows it
      # shellcheck disable=SC2086
      step gpu-suite ${SUITE_LIMIT:-520} env PYRITE_BACKEND=wgpu python3 -m pytest -q -p no:cacheprovider \
        -n ${SUITE_WORKERS:-12} -rfE --tb=line --junitxml="$OUT/suite.xml" ${SUITE_FILES:-tests} ;;
    diag42)  # session 42's GPU-only failures one case at a time (scripts/gpu_diag42.py)
      step diag42 120 env PYRITE_BACKEND=wgpu python3 scripts/gpu_diag42.py ;;
    attn-wide)  # session 43: blocks of 128 queries (TILED_WIDE_BQ): tests on this GPU, the A/B
      # around the rule's thresholds (outputs against the rule's pick), BERT-base in pyrite bench
      step attn-wide-tests 200 env PYRITE_BACKEND=wgpu python3 -m pytest -q -p no:cacheprovider \
        tests/test_attention_fused.py -k "tiled_forward or tiled_rule or tiled_layouts"
      step attn-wide 300 env PYRITE_BACKEND=wgpu python3 scripts/attention_ab.py --check \
        --kernels bq64,bq128,bq128-r2 \
        --only "BERT|512 tokens|1024|causal|GPT|L=32|scale L" --json "$OUT/attn-wide.json"
      step bert 200 env PYRITE_BACKEND=wgpu python3 -m pyrite bench --only attention,bert \
        --json "$OUT/bench-attn-bert.json" ;;
    attn-wide2)  # session 43: the causal threshold of the wide blocks, the refused forced shapes
      step attn-wide-tests 200 env PYRITE_BACKEND=wgpu python3 -m pytest -q -p no:cacheprovider \
        tests/test_attention_fused.py -k "tiled"
      step attn-wide2 200 env PYRITE_BACKEND=wgpu python3 scripts/attention_ab.py --check \
        --kernels bq64,bq128,bq128-r2 --only "causal|GPT" --json "$OUT/attn-wide2.json" ;;
    attn-wide-dawn)  # session 43: the wide blocks through Dawn (tests, BERT-base), their SASS
      step attn-dawn-tests 150 env PYRITE_BACKEND=dawn python3 -m pytest -q -p no:cacheprovider \
        tests/test_attention_fused.py -k "tiled_forward or refuses"
      step bert-dawn 100 env PYRITE_BACKEND=dawn python3 -m pyrite bench --only bert \
        --json "$OUT/bench-bert-dawn.json"
      [ -n "${WITH_SASS:-}" ] && step sass 100 bash scripts/sass_probe.sh attn_bert attn_bert_bq64 ;;
    attn-tests43)  # session 43: the attention tests (the log-sum-exp in two parts) on this GPU, both
      # implementations, and the fuzz's regressions
      step attn-tests-wgpu 120 env PYRITE_BACKEND=wgpu python3 -m pytest -q -p no:cacheprovider -x \
        tests/test_attention_fused.py tests/test_attention_dropout.py tests/test_fuzz_attention43.py
      step attn-tests-dawn 120 env PYRITE_BACKEND=dawn python3 -m pytest -q -p no:cacheprovider -x \
        tests/test_attention_fused.py tests/test_fuzz_attention43.py ;;
    attn-gemm3)  # session 44: the backward with dk, dv by GEMMs too (nn/_attention.GEMM_PRODUCTS) —
      # its tests on this GPU (E = 64 takes the tiled backward only here), then the A/B
      step attn-gemm3-tests 200 env PYRITE_BACKEND=wgpu python3 -m pytest -q -p no:cacheprovider -x \
        tests/test_attention_fused.py tests/test_attention_dropout.py tests/test_fuzz_attention43.py \
        -k "ds_gemm or gemm3 or large_negative or tiled_backward"
      gemm3_ab ;;
    llama)  # pyrite.models.LlamaForCausalLM's prefill and decode at TinyLlama-1.1B's shape, wgpu-native
      step llama 200 env PYRITE_BACKEND=wgpu python3 scripts/llama_decode_time.py --json "$OUT/llama.json" ;;
    attn-gemm3-ab)  # the backward's A/B with each dispatch's time (which kernel costs what)
      gemm3_ab ;;
    attn-tests44)  # the three attention test files on this GPU, wgpu-native
      step attn-tests-wgpu 240 env PYRITE_BACKEND=wgpu python3 -m pytest -q -p no:cacheprovider \
        tests/test_attention_fused.py tests/test_attention_dropout.py tests/test_fuzz_attention43.py ;;
    attn-tests44-dawn)  # ... and the fused-kernel tests through Dawn
      step attn-tests-dawn 120 env PYRITE_BACKEND=dawn python3 -m pytest -q -p no:cacheprovider \
        tests/test_attention_fused.py tests/test_fuzz_attention43.py ;;
    attn-sass)  # the tiled attention forward's SASS at BERT-base's shape and causal 4096 tokens
      step sass 120 bash scripts/sass_probe.sh attn_bert attn_causal ;;
    fpe)  # which error-class case dies of SIGFPE under this machine's torch (the last test named)
      step fpe 60 bash -c "env PYRITE_BACKEND=wgpu python3 -m pytest -v -p no:cacheprovider \
        tests/test_error_classes41.py 2>&1 | grep -v PASSED | tail -n 25" ;;
    sass42)  # the f16-arithmetic tile (the rule's and 8x8 k32) and the f32 big tile
      step sass 150 bash scripts/sass_probe.sh half_acc16 half_acc16_88k32 gemm ;;
    sass)  # the driver's machine code of the GEMM, GEMV and attention kernels (scripts/sass_probe.sh)
      # shellcheck disable=SC2086
      step sass 230 bash scripts/sass_probe.sh ${SASS_WORKLOADS:-gemm linear_bert attn_bert qgemv4 qgemv8 half_acc16 gemm@dawn} ;;
    waves)  # BERT-base's attention forward over batch sizes around its waves, wgpu-native
      step waves 50 env PYRITE_BACKEND=wgpu python3 scripts/attn_waves.py ;;
    decode-check)  # random decode calls against torch float64, both implementations
      step decode-wgpu 45 env PYRITE_BACKEND=wgpu python3 scripts/decode_check.py --calls 50
      step decode-dawn 45 env PYRITE_BACKEND=dawn python3 scripts/decode_check.py --calls 50 ;;
    bound)  # the operators' bound plans on and off (ops/bound.py), both implementations, then
      # the overhead and latency rows of pyrite bench
      step bound-wgpu 60 env PYRITE_BACKEND=wgpu python3 scripts/bound_ab.py
      step bound-dawn 60 env PYRITE_BACKEND=dawn python3 scripts/bound_ab.py
      step overhead-wgpu 120 env PYRITE_BACKEND=wgpu python3 -m pyrite bench --only overhead,latency \
        --json "$OUT/overhead-wgpu.json" ;;
    qgemv-probe)  # the quantized GEMV with parts of its work taken out (scripts/qgemv_probe.py)
      step qgemv-probe-int4 100 env PYRITE_BACKEND=wgpu python3 scripts/qgemv_probe.py --format 4,128 \
        --configs "32,2,4,4;64,1,2,4"
      step qgemv-probe-int8 60 env PYRITE_BACKEND=wgpu python3 scripts/qgemv_probe.py --format 8 ;;
    qgemv-shapes)  # whole-row unrolls and the fused in-place unpack against the shipped shape
      step qgemv-shapes-int4 150 env PYRITE_BACKEND=wgpu python3 scripts/qgemv_time.py --no-linear \
        --format 4,128 --unpack convert,inplace --json "$OUT/qgemv-shapes-int4.json" --configs \
        "64,2,2,2;32,2,4,4;32,2,4,8;32,2,2,8;16,2,4,16;64,2,2,4;32,4,4,4;32,1,4,16;16,2,2,16" ;;
    qgemv-shapes-int8)
      step qgemv-shapes-int8 100 env PYRITE_BACKEND=wgpu python3 scripts/qgemv_time.py --no-linear \
        --format 8 --unpack convert,inplace --json "$OUT/qgemv-shapes-int8.json" --configs \
        "64,2,2,2;32,2,4,4;32,2,4,8;64,2,2,4;32,4,4,4;16,2,4,16" ;;
    gemm-dbu)  # gemm_fast's unconditional prefetch (dbuf = 3) against the guarded one, GPU time
      step gemm-dbu-wgpu 150 env PYRITE_BACKEND=wgpu python3 scripts/gemm_tile_ab.py \
        --json "$OUT/gemm-dbu-wgpu.json" --shapes "4096,4096,4096;4096,3072,768;4096,768,3072;4096,768,768" \
        --variants "auto;fast 128x128 16x8 k8 db;fast 128x128 16x8 k8 dbu;fast 64x64 8x8 k16 db;fast 64x64 8x8 k16 dbu;fast 128x96 8x12 k16 dbu"
      step gemm-dbu-matmul 60 env PYRITE_BACKEND=wgpu python3 scripts/gemm_tile_ab.py --matmul \
        --shapes "4096,4096,4096;2048,2048,2048" --variants "auto;fast 128x128 16x8 k8 db;fast 128x128 16x8 k8 dbu" ;;
    gemm-dbu-dawn)  # the same on Dawn
      step gemm-dbu-dawn 150 env PYRITE_BACKEND=dawn python3 scripts/gemm_tile_ab.py \
        --json "$OUT/gemm-dbu-dawn.json" --shapes "4096,4096,4096;4096,3072,768;4096,768,3072" \
        --variants "auto;fast 128x128 16x8 k8 db;fast 128x128 16x8 k8 dbu;fast 128x96 8x12 k16 dbu" ;;
    gemm-dbu2)  # dbuf = 4 (two K steps an iteration, constant buffers) against dbuf = 3, wgpu-native
      step gemm-dbu2 120 env PYRITE_BACKEND=wgpu python3 scripts/gemm_tile_ab.py --json "$OUT/gemm-dbu2.json" \
        --shapes "4096,4096,4096;4096,3072,768;4096,768,3072;4096,768,768" \
        --variants "auto;fast 128x128 16x8 k8 dbu2;fast 64x64 8x8 k16 db;fast 64x64 8x8 k16 dbu2" ;;
    acc16)  # f16 arithmetic's tiles (per-step f32 folds, and f16 sums across K) beside f32, wgpu-native
      step acc16-f32 60 env PYRITE_BACKEND=wgpu python3 scripts/gemm_tile_ab.py \
        --shapes "4096,4096,4096;4096,3072,768" --variants "auto"
      step acc16 150 env PYRITE_BACKEND=wgpu python3 scripts/gemm_tile_ab.py --f16 --acc16 \
        --json "$OUT/acc16.json" --shapes "4096,4096,4096;4096,3072,768;4096,768,3072" \
        --variants "auto;fast 128x128 8x16 k16 dbu;fast 128x128 8x8 k16 dbu;fast 128x128 8x8 k32 dbu;fast 128x128 8x16 k32 dbu;fast 128x128 16x8 k16 dbu"
      step acc16-sums 120 env PYRITE_BACKEND=wgpu python3 scripts/gemm_tile_ab.py --f16 --acc16-sums \
        --json "$OUT/acc16-sums.json" --shapes "4096,4096,4096;4096,3072,768" \
        --variants "fast 128x128 8x16 k16 dbu;fast 128x128 8x8 k16 dbu;fast 128x128 16x16 k16 dbu;fast 256x128 16x16 k16 dbu;fast 128x256 16x16 k16 dbu;fast 128x128 16x16 k32 dbu" ;;
    gemm-bake)  # the fast tiles with each shape's sizes and strides baked in (ops/matmul.BAKE), wgpu-native
      step gemm-bake 120 env PYRITE_BACKEND=wgpu python3 scripts/gemm_tile_ab.py --bake --json "$OUT/gemm-bake.json" \
        --shapes "4096,4096,4096;4096,3072,768;4096,768,3072;4096,768,768" \
        --variants "auto;fast 128x128 16x8 k8 dbu2;fast 64x64 8x8 k16 db;fast 128x96 8x12 k16 dbu" ;;
    gemm-k16)  # the big tile in K steps of 16 (half the barriers) and 512-invocation tiles, f32, then f16 arithmetic's, wgpu-native
      step gemm-k16 90 env PYRITE_BACKEND=wgpu python3 scripts/gemm_tile_ab.py --json "$OUT/gemm-k16.json" \
        --shapes "4096,4096,4096;4096,3072,768;4096,768,3072" \
        --variants "auto;fast 128x128 16x8 k16 dbu;fast 128x128 16x8 k16 db;fast 128x128 8x16 k16 dbu;fast 128x128 8x4 k16 dbu;fast 128x128 4x8 k16 dbu;fast 256x128 8x8 k16"
      step acc16-more 90 env PYRITE_BACKEND=wgpu python3 scripts/gemm_tile_ab.py --f16 --acc16 \
        --json "$OUT/acc16-more.json" --shapes "4096,4096,4096;4096,3072,768;4096,768,3072" \
        --variants "auto;fast 128x64 8x8 k32 dbu;fast 64x128 8x8 k32 dbu;fast 128x128 8x8 k32 db;fast 256x128 8x8 k16 dbu;fast 128x256 8x8 k16 dbu;fast 128x128 8x4 k32 dbu"
      step acc16-sums-k32 60 env PYRITE_BACKEND=wgpu python3 scripts/gemm_tile_ab.py --f16 --acc16-sums \
        --shapes "4096,4096,4096;4096,3072,768" --variants "fast 128x128 8x8 k32 dbu;fast 128x128 8x8 k16 dbu;fast 256x128 8x8 k16 dbu;fast 128x256 8x8 k16 dbu" ;;
    gemm-dbub)  # the unconditional prefetch with a barrier after its loads (dbuf = 5), f32 and f16 arithmetic, wgpu-native
      step gemm-dbub 90 env PYRITE_BACKEND=wgpu python3 scripts/gemm_tile_ab.py --json "$OUT/gemm-dbub.json" \
        --shapes "4096,4096,4096;4096,3072,768;4096,768,3072;4096,768,768" \
        --variants "auto;fast 128x128 16x8 k8 dbub;fast 64x64 8x8 k16 db;fast 64x64 8x8 k16 dbub"
      step acc16-dbub 60 env PYRITE_BACKEND=wgpu python3 scripts/gemm_tile_ab.py --f16 --acc16 \
        --json "$OUT/acc16-dbub.json" --shapes "4096,4096,4096;4096,3072,768;4096,768,3072" \
        --variants "auto;fast 128x128 8x4 k32 dbub" ;;
    profile-check)  # does pr.profiler read BERT-base's device time truly (sum, span, overlap, wall)? wgpu-native
      step profile-check 200 env PYRITE_BACKEND=wgpu python3 scripts/profile_check.py ;;
    acc16-n768)  # f16 arithmetic's big tile forced where N = 768 (the rule keeps 64x64 there), wgpu-native
      step acc16-n768 120 env PYRITE_BACKEND=wgpu python3 scripts/gemm_tile_ab.py --f16 --acc16 \
        --json "$OUT/acc16-n768.json" --shapes "4096,768,768;4096,768,3072;4096,2304,768;128,768,768;1024,768,3072" \
        --variants "auto;fast 128x128 8x4 k32 dbu;fast 64x64 8x8 k16 dbu" ;;
    scan)  # the one-pass look-back scan: its tests and the scan tests on this GPU, then its A/B against the chunked path and whole rows
      step scan-tests 150 env PYRITE_BACKEND=wgpu python3 -m pytest -q -x -p no:cacheprovider \
        tests/test_scan_lookback.py tests/test_scan.py
      step scan-tests-dawn 90 env PYRITE_BACKEND=dawn python3 -m pytest -q -x -p no:cacheprovider \
        tests/test_scan_lookback.py
      step scan-ab 150 env PYRITE_BACKEND=wgpu python3 scripts/scan_ab.py --json "$OUT/scan-ab.json" ;;
    scan-lb)  # the look-back scan's variants (chunk order ticket|id, reset last|pass: the same-address atomics) against the chunked path, GPU time a dispatch
      step scan-lb 200 env PYRITE_BACKEND=wgpu python3 scripts/scan_ab.py --paths lookback,chunked \
        --lookback ticket:last,id:last,ticket:pass,id:pass --json "$OUT/scan-lb.json" ;;
    scan-next)  # the look-back scan's unrolled staging and early superblock totals, both on and off, the rule's chunks; tests first
      step scan-next-tests 150 env PYRITE_BACKEND=wgpu python3 -m pytest -q -x -p no:cacheprovider \
        tests/test_scan_lookback.py tests/test_scan.py
      step scan-next 240 env PYRITE_BACKEND=wgpu python3 scripts/scan_ab.py --paths lookback,chunked \
        --unroll 0,1 --early 0,1 --shapes 1x16777216,1x8388608,1x4194304,1x1048576,4x4194304,64x65536,1024x4096,4096x1024 \
        --json "$OUT/scan-next.json" ;;
    scan-final)  # the scan tests on both implementations, the chunked path's staged unit (2,048 / 4,096) beside the look-back, then the SASS of the look-back and chunked kernels
      step scan-final-tests 150 env PYRITE_BACKEND=wgpu python3 -m pytest -q -p no:cacheprovider \
        tests/test_scan_lookback.py tests/test_scan.py tests/test_hunt_scans39.py
      step scan-final-tests-dawn 90 env PYRITE_BACKEND=dawn python3 -m pytest -q -p no:cacheprovider \
        tests/test_scan_lookback.py
      step scan-final 200 env PYRITE_BACKEND=wgpu python3 scripts/scan_ab.py --paths lookback,chunked \
        --chunk-units 2048,4096 --shapes 1x16777216,1x8388608,4x4194304,64x65536,1x1048576 \
        --json "$OUT/scan-final.json"
      step scan-sass 150 bash scripts/sass_probe.sh scan_lookback scan_chunked scan_chunked4k ;;
    scan-unit)  # the look-back scan's chunk lengths (ops/reduce.SCAN_LOOKBACK_CHUNK), its tests on this GPU first
      step scan-unit-tests 120 env PYRITE_BACKEND=wgpu python3 -m pytest -q -x -p no:cacheprovider \
        tests/test_scan_lookback.py
      step scan-unit 200 env PYRITE_BACKEND=wgpu python3 scripts/scan_ab.py --paths lookback,chunked \
        --units 2048,4096,8192 --json "$OUT/scan-unit.json" ;;
    parity)  # the GPU's own kernel choices against numpy float64 (scripts/gpu_parity_check.py)
      step parity 120 env PYRITE_BACKEND=wgpu python3 scripts/gpu_parity_check.py ;;
    *) echo "gpu_session: unknown step $s" ;;
  esac
done
