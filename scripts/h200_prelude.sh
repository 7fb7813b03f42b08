# shellcheck shell=bash
# Source this at the start of a device `run` command (../shared/gpu.md), with carry [".gl", ".whl"]:
#   source scripts/h200_prelude.sh && python3 -m pyrite bench --json $OUT/bench.json
# It unpacks the Vulkan loader (.gl/, Debian .debs), installs the wheels in .whl/ (wgpu, wgpudawn,
# their dependencies, pytest, hypothesis) into a temporary folder, and points Python and the
# loader at them. numpy and torch are already on that machine. Sourced, so no `set -e` here.
# Fill .gl/ and .whl/ once on the development machine with the commands in gpu.md.
if ! (return 0 2>/dev/null); then
  echo "h200_prelude: source this file (source scripts/h200_prelude.sh), don't run it" >&2
  exit 1
fi
if ! ls .gl/*.deb >/dev/null 2>&1 || ! ls .whl/*.whl >/dev/null 2>&1; then
  echo "h200_prelude: .gl/*.deb or .whl/*.whl missing: carry [\".gl\", \".whl\"] (see gpu.md)" >&2
  return 1
fi
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
PYRITE_SITE=$(mktemp -d)
if ! python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$PYRITE_SITE" .whl/*.whl >"$PYRITE_SITE.log" 2>&1; then
  cat "$PYRITE_SITE.log" >&2
  echo "h200_prelude: pip install of .whl/ failed" >&2
  return 1
fi
export PYTHONPATH="$PWD:$PYRITE_SITE"
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export PYTHONUNBUFFERED=1
echo "h200_prelude: loader unpacked, wheels in $PYRITE_SITE, python $(python3 -V 2>&1 | cut -d' ' -f2)"
