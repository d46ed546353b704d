#!/usr/bin/env bash
# Issue 38's models at the full budget: experiment=multi30k_recipe (8,811 steps, 114 minutes on 2
# cores) with each seed of SEEDS (comma-separated), job K in SWEEP/K (a Hydra multirun); OVERRIDEs
# go to every job. ckpt_path=last: the same command again leaves the finished jobs as they are and
# resumes a stopped one from its last.ckpt.
#   DATA_DIR=../shared/data bash experiments/multi30k/full.sh SWEEP SEEDS [OVERRIDE ...]
#   python3 run.py task=report task.sweep_dir=SWEEP
set -u
cd "$(dirname "$0")/../.."
python3 run.py -m experiment=multi30k_recipe "seed=${2:?usage: full.sh SWEEP SEEDS [OVERRIDE ...]}" "${@:3}" \
  ckpt_path=last progress=false "hydra.sweep.dir=${1:?}"
