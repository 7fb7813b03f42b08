#!/usr/bin/env bash
# SASS of pyrite's kernels on a lent NVIDIA GPU (scripts/sass_probe.py): each workload in a
# process of its own with an empty driver shader cache, then each program's code cut out of the
# cache and disassembled: its highest register, local-memory loads and stores (spills) and an
# opcode histogram.
#   run(command="bash scripts/sass_probe.sh [workload[@dawn] ...]", carry=[".gl", ".whl"])
# shellcheck disable=SC1091
source scripts/h200_prelude.sh || exit 1
OUT=${OUT:-$(mktemp -d)}
W=$(mktemp -d)  # the code and its SASS, tarred into $OUT/sass.tgz at the end (the
# device returns at most 8 files)
names=${*:-gemm linear_bert attn_bert qgemv4 qgemv8}
for spec in $names; do  # a workload, or workload@dawn for Dawn's build of it
  name=${spec/@/_}; wl=${spec%@*}; impl=wgpu; [[ $spec == *@* ]] && impl=${spec#*@}
  cache=$(mktemp -d)
  echo "== $name" | tee -a "$OUT/sass.txt"
  __GL_SHADER_DISK_CACHE=1 __GL_SHADER_DISK_CACHE_PATH=$cache __GL_SHADER_DISK_CACHE_SKIP_CLEANUP=1 \
    __GL_SHADER_DISK_CACHE_SIZE=10000000000 PYRITE_BACKEND=$impl \
    timeout 120 python3 scripts/sass_probe.py run "$wl" 2>&1 | tail -3 | tee -a "$OUT/sass.txt"
  mkdir -p "$W/$name" && tar czf "$W/$name/cache.tgz" -C "$cache" .  # (the raw entries too)
  python3 scripts/sass_probe.py carve "$cache" "$W/$name" 2>&1 | tail -30 | tee -a "$OUT/sass.txt"
  for f in "$W/$name"/*.sm; do  # raw instruction streams (the driver's containers)
    [ -e "$f" ] || continue
    nvdisasm -b SM90 "$f" >"$f.sass" 2>&1
    {
      echo "-- $f: max register R$(grep -oE '\bR[0-9]+\b' "$f.sass" | tr -d R | sort -n | tail -1)," \
        "LDL $(grep -c LDL "$f.sass") STL $(grep -c STL "$f.sass"), lines $(wc -l <"$f.sass")"
      grep -oE '^\s+/\*[0-9a-f]+\*/\s+(@!?U?P[0-9T] )?[A-Z0-9_.]+' "$f.sass" | awk '{print $NF}' |
        sort | uniq -c | sort -rn | head -25 | tr '\n' ' '
      echo
    } | tee -a "$OUT/sass.txt"
  done
done
tar czf "$OUT/sass.tgz" -C "$W" .
