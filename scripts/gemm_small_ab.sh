# The small-product and 96-column GEMM tile A/Bs, the BERT batch-1 tune, and f16-arithmetic tiles
# (GPU time, both implementations): run(command="bash scripts/gemm_small_ab.sh", carry=[".gl", ".whl"])
source scripts/h200_prelude.sh >/dev/null || exit 1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
VS="auto;fast 32x32 4x4 k32 db kg4;fast 32x32 4x4 k64 kg8;fast 32x64 4x4 k32 kg2;fast 32x64 4x4 k64 kg4;fast 64x64 4x4 k32 db kg2;fast 16x64 4x4 k64 kg4;fast 32x32 4x4 k32 db;fast 64x64 4x4 k16 db"
S="128,768,768;128,2304,768;128,3072,768;128,768,3072;512,768,768;512,3072,768"
V96="auto;fast 128x96 8x12 k16 db;fast 128x96 8x12 k16;fast 64x96 8x12 k16 db;fast 128x128 16x8 k8 db;fast 64x64 8x8 k16 db;fast 64x64 8x8 k16"
VH="auto;fast 128x128 16x8 k8 db;fast 128x128 8x8 k32 db;fast 128x128 16x8 k16 db;fast 128x128 8x16 k16 db;fast 128x128 8x8 k16 db;fast 128x128 8x8 k16"
echo "== small wgpu"; PYRITE_BACKEND=wgpu timeout 120 python3 scripts/gemm_tile_ab.py --shapes "$S" --variants "$VS" --json $OUT/small-wgpu.json 2>&1 | tail -80
echo "== tune wgpu"; PYRITE_TUNE_CACHE=$OUT/tune-cache.json PYRITE_BACKEND=wgpu timeout 150 python3 -m pyrite tune --reps 10 --shapes 128x768x768:k,128x2304x768:k,128x3072x768:k,128x768x3072:k --json $OUT/tune-all.json 2>&1 | tr '\r' '\n' | grep -v "shape/s" | tail -12
echo "== tiles96 wgpu"; PYRITE_BACKEND=wgpu timeout 120 python3 scripts/gemm_tile_ab.py --variants "$V96" --json $OUT/tiles96-wgpu.json 2>&1 | tail -60
echo "== acc16 wgpu"; PYRITE_BACKEND=wgpu timeout 100 python3 scripts/gemm_tile_ab.py --f16 --acc16 --shapes "4096,4096,4096;4096,3072,768" --variants "$VH" --json $OUT/acc16-wgpu.json 2>&1 | tail -30
echo "== small dawn"; PYRITE_BACKEND=dawn timeout 120 python3 scripts/gemm_tile_ab.py --shapes "$S" --variants "$VS" --json $OUT/small-dawn.json 2>&1 | tail -80
echo "== tiles96 dawn"; PYRITE_BACKEND=dawn timeout 100 python3 scripts/gemm_tile_ab.py --variants "$V96" --json $OUT/tiles96-dawn.json 2>&1 | tail -60
