#!/usr/bin/env bash
# Every GPU measurement of issues 22 and 34 in one command, for a fresh GPU machine (experiments/gpu/README.md):
#   bash experiments/gpu/run.sh [--device cuda|cpu] [--smoke] [--out DIR] [--budget-minutes 25]
# It installs the carried wheels when needed (CUDA only), runs each step within the time budget,
# and writes DIR/results.json and DIR/results.md (default experiments/gpu). Exit status 1 if any
# step failed. python3: the project's interpreter on PATH, as in every script of experiments/.
set -euo pipefail
cd "$(dirname "$0")/../.."
exec python3 experiments/gpu/run.py "$@"
