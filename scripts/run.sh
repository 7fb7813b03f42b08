#!/usr/bin/env bash
# The main job: set up (scripts/setup.sh), show the WebGPU device pyrite uses, run the demo.
# Usage: bash scripts/run.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/pyrite info
.venv/bin/python -m pyrite.demo
