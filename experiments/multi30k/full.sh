#!/usr/bin/env bash
# Issue 38's models at the full budget: `experiment=multi30k_recipe` (8,811 steps, 114 minutes on
# 2 cores; about 3.3 hours in a lane of one thread beside a second lane) with each SEED, job K in
# SWEEP/K, in two lanes of one thread (lanes.sh: a finished job is skipped, a stopped one resumed
# from its last.ckpt, so the script can be stopped and run again). OVERRIDEs after `--` go to every
# job.
#   DATA_DIR=../shared/data bash experiments/multi30k/full.sh SWEEP SEED [SEED ...] [-- OVERRIDE ...]
#   python run.py task=report task.sweep_dir=SWEEP
set -u
cd "$(dirname "$0")/../.."
if [ $# -lt 2 ]; then
  echo "usage: full.sh SWEEP SEED [SEED ...] [-- OVERRIDE ...]" >&2
  exit 1
fi
SWEEP=$1
shift
source experiments/multi30k/lanes.sh
SEEDS=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do SEEDS+=("$1"); shift; done
[ $# -gt 0 ] && shift
OVERRIDES=("$@")

lane() {  # lane FIRST: jobs FIRST, FIRST + 2, ...
  local k
  for ((k = $1; k < ${#SEEDS[@]}; k += 2)); do
    job "$SWEEP/$k" experiment=multi30k_recipe "seed=${SEEDS[$k]}" "${OVERRIDES[@]}"
  done
}
even_jobs() { lane 0; }
odd_jobs() { lane 1; }
lanes even_jobs odd_jobs
