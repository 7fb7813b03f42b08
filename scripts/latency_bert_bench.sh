# The latency, BERT (eager and compiled) and attention rows of pyrite bench on both implementations:
#   run(command="bash scripts/latency_bert_bench.sh", carry=[".gl", ".whl"])
source scripts/h200_prelude.sh >/dev/null || exit 1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== wgpu"; PYRITE_BACKEND=wgpu timeout 150 python3 -m pyrite bench --only latency,bert,attention --json $OUT/final-wgpu.json 2>&1 | tail -40
echo "== dawn"; PYRITE_BACKEND=dawn timeout 100 python3 -m pyrite bench --only latency,bert --json $OUT/final-dawn.json 2>&1 | tail -30
