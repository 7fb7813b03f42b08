#!/usr/bin/env bash
# The main job: set up (scripts/setup.sh), show the WebGPU device pyrite uses, run the demo,
# then train an MLP on scikit-learn's digits (pyrite train: progress, accuracy, loss curve).
# Usage: bash scripts/run.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/pip install -q -e ".[train]"
.venv/bin/pyrite info
.venv/bin/python -m pyrite.demo
.venv/bin/pyrite train
