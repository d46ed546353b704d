#!/usr/bin/env bash
# Issue 49's both-directions model on Multi30k (experiment=multi30k/both_directions) and the
# one-direction recipes it is compared with, at the same step budget: STEPS (default the recipe's
# 8,811). `both` beside `en_de` in two lanes of one thread, then `de_en` on both cores; at the full
# budget `en_de` is the recipe's published run (multi30k_en_de.ckpt) and is not trained again.
# Validation on one batch a set (the tested average does not depend on it); OVERRIDEs go to every run.
# ckpt_path=last: the script run again leaves the finished runs as they are and resumes a stopped one.
#   DATA_DIR=../shared/data [STEPS=2203] bash experiments/multi30k/both_directions/run.sh RUNS [OVERRIDE ...]
set -u
cd "$(dirname "$0")/../../.."
RUNS=${1:?usage: run.sh RUNS [OVERRIDE ...]}
STEPS=${STEPS:-8811}
COMMON=("trainer.max_steps=$STEPS" trainer.limit_val_batches=1 "${@:2}" ckpt_path=last progress=false)
OMP_NUM_THREADS=1 python3 run.py experiment=multi30k/both_directions "${COMMON[@]}" "hydra.run.dir=$RUNS/both" &
[ "$STEPS" = 8811 ] || OMP_NUM_THREADS=1 python3 run.py experiment=multi30k_recipe "${COMMON[@]}" \
  "hydra.run.dir=$RUNS/en_de" &
wait
OMP_NUM_THREADS=2 python3 run.py experiment=multi30k/de_en "${COMMON[@]}" "hydra.run.dir=$RUNS/de_en"
