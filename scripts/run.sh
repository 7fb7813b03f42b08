#!/usr/bin/env bash
# The main job: set up (scripts/setup.sh), show the WebGPU device pyrite uses, run the demo,
# then train an MLP on scikit-learn's digits (pyrite train: progress, accuracy, loss curve, and
# the model exported as a browser bundle), and run that bundle in headless Chromium if there is
# one (scripts/setup.sh --test installs it; `pyrite web runs/digits/web` serves the page).
# Usage: bash scripts/run.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/pip install -q -e ".[train]"
.venv/bin/pyrite info
.venv/bin/python -m pyrite.demo
.venv/bin/pyrite train
if command -v chromium >/dev/null 2>&1 || command -v google-chrome >/dev/null 2>&1; then
  .venv/bin/pyrite web runs/digits/web --check
else
  echo "(no Chromium here: the browser check is skipped; to draw a digit in your own browser: .venv/bin/pyrite web runs/digits/web)"
fi
