#!/usr/bin/env bash
# Issue 51's students (experiment=multi30k/distilled): `distilled` trains on the teacher's translations
# alone, `distilled_orig` on them and the original pairs (task.originals_weight=1.0). The teacher's
# translations, the same for both, are made once, on both cores (task.until=synthetic); then both
# students train in two lanes of one thread, `distilled_orig` on a copy of `distilled`'s translations
# (task.translations). MEMBERS: the folder of the teacher's members seed1235/ and seed1236/ (full.sh's
# runs); OVERRIDEs go to both students (e.g. task.baseline=RUN: the run they are tested against).
# Each pipeline goes on where it stopped when the script runs again.
#   MEMBERS=RUNS_OF_FULL_SH DATA_DIR=../shared/data bash experiments/multi30k/distill/run.sh RUNS [OVERRIDE ...]
set -u
cd "$(dirname "$0")/../../.."
RUNS=${1:?usage: run.sh RUNS [OVERRIDE ...]}
STUDENT=(python3 run.py experiment=multi30k/distilled "${@:2}" progress=false)
OMP_NUM_THREADS=2 "${STUDENT[@]}" task.until=synthetic "hydra.run.dir=$RUNS/distilled" || exit 1
OMP_NUM_THREADS=1 "${STUDENT[@]}" "hydra.run.dir=$RUNS/distilled" &
OMP_NUM_THREADS=1 "${STUDENT[@]}" task.originals_weight=1.0 "task.translations=$RUNS/distilled" \
  "hydra.run.dir=$RUNS/distilled_orig" &
wait
