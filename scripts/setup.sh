#!/usr/bin/env bash
# Set up this checkout for development, idempotently (run it again at will):
#   1. a virtual environment at .venv (python3 -m venv; python3-venv is installed if missing),
#   2. pyrite installed editable into it (with --test: also pytest, hypothesis and CPU torch),
#   3. a WebGPU adapter: on a machine with no GPU, Mesa's lavapipe (mesa-vulkan-drivers).
#   4. with --test: Chromium (the browser-bundle tests run pyrite.web bundles in it).
# Packages are installed with apt-get only as root or with password-less sudo; otherwise the
# command to run is printed.
# Usage: bash scripts/setup.sh [--test]
set -euo pipefail
script=$(readlink -f "$0")
cd "$(dirname "$script")/.."

mode="base"
for arg in "$@"; do
  case "$arg" in
    --test) mode="test" ;;
    -h|--help) sed -n '2,9s/^# \{0,1\}//p' "$script"; exit 0 ;;
    *) echo "setup.sh: unknown option '$arg' (try --help)" >&2; exit 2 ;;
  esac
done

step() { echo "setup: $*"; }
fail() { echo "setup: error: $*" >&2; exit 1; }

# apt-get as root, or through sudo when it needs no password; empty when neither works.
if [ "$(id -u)" = 0 ]; then
  SUDO=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  SUDO="sudo -n"
else
  SUDO="none"
fi

apt_install() {  # apt_install PACKAGE...: install Debian packages, refreshing the lists if needed
  if [ "$SUDO" = none ] || ! command -v apt-get >/dev/null 2>&1; then return 1; fi
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-cache show "$@" >/dev/null 2>&1; then
    $SUDO apt-get update -qq >/dev/null || return 1
  fi
  $SUDO apt-get install -y -qq "$@" >/dev/null
}

# ---- 1. the virtual environment -----------------------------------------------------------
python3 -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null \
  || fail "pyrite needs python3 >= 3.10 (found: $(python3 --version 2>&1))"
if ! .venv/bin/python -m pip --version >/dev/null 2>&1; then
  step "creating .venv"
  rm -rf .venv
  if ! python3 -m venv .venv >/dev/null 2>&1; then
    # Debian ships venv's pip bootstrap separately, as python3-venv (or python3.X-venv).
    rm -rf .venv
    pyver=$(python3 -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
    step "installing python3-venv"
    apt_install python3-venv || apt_install "python${pyver}-venv" \
      || fail "python3 -m venv failed; install it with: sudo apt-get install python3-venv"
    python3 -m venv .venv || fail "python3 -m venv failed"
  fi
fi

# ---- 2. pyrite, editable ------------------------------------------------------------------
# A stamp in .venv remembers which pyproject.toml was installed, so a rerun skips pip; the test
# extra includes the base install.
key=$(sha256sum pyproject.toml | cut -c1-16)
if [ "$(cat .venv/.setup-test 2>/dev/null)" = "$key" ] \
   || { [ $mode = base ] && [ "$(cat .venv/.setup-base 2>/dev/null)" = "$key" ]; }; then
  step "pyrite already installed in .venv ($mode)"
else
  target="."
  [ $mode = test ] && target=".[test]"
  log=.venv/pip-install.log
  if [ $mode = test ] && ! .venv/bin/python -c 'import torch, sys; sys.exit(torch.version.cuda is not None)' 2>/dev/null; then
    # torch is only a test dependency, pinned; a CUDA build would be gigabytes for nothing.
    # Ask pip which build it would take before letting it download one.
    pick=$(.venv/bin/python -m pip install --dry-run --quiet --report - "torch==2.13.0" 2>/dev/null \
      | .venv/bin/python -c 'import json, sys
r = json.load(sys.stdin)["install"]
print(next((i["metadata"]["version"] for i in r if i["metadata"]["name"] == "torch"), ""))' || true)
    case "$pick" in
      *+cpu) ;;
      *) fail "pip would install torch '${pick:-?}', not a CPU build. Install the CPU wheel first:
  .venv/bin/pip install torch==2.13.0 --index-url <PyTorch's CPU-only wheel index>
then rerun this script." ;;
    esac
  fi
  step "installing pyrite ($target) into .venv"
  if ! .venv/bin/python -m pip install -e "$target" >"$log" 2>&1; then
    tail -n 30 "$log" >&2
    fail "pip install failed; full log in $log"
  fi
  echo "$key" > ".venv/.setup-$mode"
fi

# ---- 3. a WebGPU adapter ------------------------------------------------------------------
# Count native adapters (lavapipe shows as 'llvmpipe ...' via Vulkan); a GL-only one won't do.
count_adapters() {
  .venv/bin/python -c 'import wgpu
print(sum(a.info["backend_type"] in ("Vulkan", "Metal", "D3D12") for a in wgpu.gpu.enumerate_adapters_sync()))' \
    2>/dev/null || echo 0
}
n=$(count_adapters)
if [ "$n" -gt 0 ]; then
  step "WebGPU adapters found: $n"
elif [ "$SUDO" != none ] && command -v apt-get >/dev/null 2>&1; then
  step "no WebGPU adapter; installing Mesa's lavapipe (mesa-vulkan-drivers)"
  apt_install mesa-vulkan-drivers || fail "apt-get install mesa-vulkan-drivers failed"
  n=$(count_adapters)
  [ "$n" -gt 0 ] || fail "mesa-vulkan-drivers is installed but wgpu still finds no adapter"
  step "WebGPU adapters found: $n"
else
  echo "setup: WARNING: no WebGPU adapter, and this user cannot install packages." >&2
  echo "setup: on a machine with no GPU, install Mesa's lavapipe: sudo apt-get install mesa-vulkan-drivers" >&2
fi

# ---- 4. (--test) a browser for the browser-bundle tests (tests/test_web47.py) ----------------
# pyrite.web's bundles are checked in headless Chromium with WebGPU (SwiftShader where there is
# no GPU); Debian's chromium package, as the other system packages here.
if [ $mode = test ]; then
  if command -v chromium >/dev/null 2>&1 || command -v google-chrome >/dev/null 2>&1; then
    step "Chromium found (browser-bundle tests)"
  elif [ "$SUDO" != none ] && command -v apt-get >/dev/null 2>&1; then
    step "installing Chromium for the browser-bundle tests (chromium)"
    # (a failure here fails only those tests, by name, not the whole set-up)
    apt_install chromium || echo "setup: WARNING: apt-get install chromium failed; the browser-bundle tests will fail under CI and skip elsewhere" >&2
  else
    echo "setup: WARNING: no Chromium; the browser-bundle tests will skip (outside CI). Install it: sudo apt-get install chromium" >&2
  fi
fi
