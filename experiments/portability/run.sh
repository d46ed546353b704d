#!/usr/bin/env bash
# The suite's measured bounds under three numeric profiles of one CPU (docs/layout.md, "Bounds that
# hold on any CPU"): the whole suite on this CPU's own code path, then make test-portable's tests under
# PORTABLE=avx2 and PORTABLE=default, each writing a junit report; then the table of the values the
# tests record (margins.py, run by the .venv that make builds). With DATA_DIR set, the shipped
# model's test2016 checks run too.
#
#     bash experiments/portability/run.sh OUT      # about 15 minutes on 2 cores
set -euo pipefail
out=${1:?usage: run.sh OUT (a folder for the reports)}
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$(dirname "$0")/../.."
status=0
make test PYTEST_ARGS="--junitxml=$out/native.xml" || status=1
for profile in avx2 default; do
    make test-portable PORTABLE=$profile PYTEST_ARGS="--junitxml=$out/$profile.xml" || status=1
done
.venv/bin/python experiments/portability/margins.py "native=$out/native.xml" "avx2=$out/avx2.xml" \
    "default=$out/default.xml" | tee "$out/margins.md"
exit $status
