#!/usr/bin/env bash
# Full-budget Multi30k recipe runs side by side on one lent GPU (experiments/multi30k/README.md, "On a
# GPU"). `start` installs the carried wheels when the project does not import (experiments/gpu/run.py
# --only setup) and launches each JOB in a process session of its own, so that it outlives the device
# tool's command; `wait` follows them for at most SECONDS, then packs each finished run into
# OUT/JOB.tgz: the tested checkpoint, metrics, logs, curves and translations (no epoch or resume
# checkpoints). A job is one `python3 run.py` command (a finished one left as it is, a stopped one
# resumed: ckpt_path=last, or the pipeline's own stages) plus GPU_OVERRIDES; its output: RUNS/JOB.out.
# python3: the project's interpreter on PATH, as in every script of experiments/.
#   bash experiments/multi30k/gpu.sh start RUNS JOB...    JOB: seedN (the recipe with seed N), both, de_en,
#                                                         distilled, distilled_orig (-sSEED: another seed),
#                                                         distillation (issue 51 from scratch, below)
#   bash experiments/multi30k/gpu.sh wait RUNS SECONDS OUT
# Data: $DATA_DIR, else .gpu-data; cache: $TRANSFORMER_MT_CACHE, else .gpu-cache (carry the
# vocabularies made here: runs on every machine then share one tokenizer, which ensembles need).
set -u
cd "$(dirname "$0")/../.."
SELF=experiments/multi30k/gpu.sh
export DATA_DIR=${DATA_DIR:-$PWD/.gpu-data}
export TRANSFORMER_MT_CACHE=${TRANSFORMER_MT_CACHE:-$PWD/.gpu-cache}
# float32 as the recipe says (TF32 matrix products on the GPU) and eager: the model is small enough
# that kernel launches, not arithmetic, bound the step, and a compiled run waits ~46 s for its graphs.
read -r -a GPU <<< "${GPU_OVERRIDES:-trainer=gpu trainer.precision=32-true module.compile=false data.num_workers=2 \
logger=csv callbacks.dashboard.every_n_validations=1000}"
# Validation of a recipe run on one batch: it still ends every epoch with the epoch checkpoint that the
# tested average of the last 10 is made of, without a greedy decode of val each epoch (the weights do
# not depend on validation; val BLEU of a tested checkpoint: task=evaluate data.split=val). A
# student's on all of val (3 batches): its curve.
VAL_RECIPE=${VAL_RECIPE:-trainer.limit_val_batches=1}
VAL_STUDENT=${VAL_STUDENT:-trainer.limit_val_batches=1.0}

run_job() {  # run_job RUNS NAME: the job in the foreground, in RUNS/NAME
  local runs=$1 name=$2 seed
  local common=("${GPU[@]}" progress=false "hydra.run.dir=$runs/$name")
  seed=${name##*-s}
  [ "$seed" = "$name" ] && seed=1234
  case ${name%-s*} in
    seed*) python3 run.py experiment=multi30k_recipe "seed=${name#seed}" "$VAL_RECIPE" ckpt_path=last "${common[@]}" ;;
    both) python3 run.py experiment=multi30k/both_directions "$VAL_RECIPE" ckpt_path=last "${common[@]}" ;;
    de_en) python3 run.py experiment=multi30k/de_en "$VAL_RECIPE" ckpt_path=last "${common[@]}" ;;
    distilled) python3 run.py experiment=multi30k/distilled "seed=$seed" "$VAL_STUDENT" "${common[@]}" ;;
    distilled_orig) python3 run.py experiment=multi30k/distilled "seed=$seed" task.originals_weight=1.0 \
      "task.translations=$runs/distilled${name#distilled_orig}" "$VAL_STUDENT" "${common[@]}" ;;
    distillation) distillation "$runs" ;;
    *) echo "gpu.sh: no job $name (seedN, both, de_en, distilled, distilled_orig, distillation)" >&2; return 1 ;;
  esac
}

distillation() {  # distillation RUNS: issue 51 in one job. The teacher's members seed1235 and seed1236
  # side by side; then the teacher's translations once (distilled's synthetic stage), then both
  # students side by side on them: RUNS holds the members.
  local runs=$1
  bash "$SELF" job "$runs" seed1235 & bash "$SELF" job "$runs" seed1236 & wait
  [ -f "$runs/seed1235/metrics.json" ] && [ -f "$runs/seed1236/metrics.json" ] || return 1
  MEMBERS=$runs python3 run.py experiment=multi30k/distilled task.until=synthetic "${GPU[@]}" progress=false \
    "hydra.run.dir=$runs/distilled" || return 1
  MEMBERS=$runs bash "$SELF" job "$runs" distilled & MEMBERS=$runs bash "$SELF" job "$runs" distilled_orig & wait
}

start() {  # start RUNS JOB...
  local runs=$1 name
  shift
  mkdir -p "$runs"
  python3 experiments/gpu/run.py --only setup --out "$runs/setup" > "$runs/setup.log" 2>&1
  if ! python3 -c "import transformer_mt, hydra" 2> /dev/null; then
    echo "gpu.sh: the project does not import after the install ($runs/setup.log)" >&2
    return 1
  fi
  for name in "$@"; do
    setsid nohup bash "$SELF" job "$runs" "$name" > "$runs/$name.out" 2>&1 < /dev/null &
    echo "$name: started" >&2
  done
}

follow() {  # follow RUNS SECONDS OUT: progress every 30 s while a job runs, then the finished runs packed
  local runs=$1 out=$3 end=$((SECONDS + $2)) report=$((SECONDS + 30)) log folder name
  while [ $SECONDS -lt $end ] && pgrep -f "gpu.sh job $runs " > /dev/null; do
    sleep 1
    [ $SECONDS -lt $report ] && continue
    report=$((SECONDS + 30))
    for log in "$runs"/*/run.log; do
      [ -f "$log" ] && echo "$(basename "$(dirname "$log")"): $(tail -n 1 "$log" | cut -c 1-150)" >&2
    done
  done
  mkdir -p "$out"
  for folder in "$runs"/*/; do
    name=$(basename "$folder")
    [ "$name" = setup ] && continue
    if [ -f "$runs/$name/metrics.json" ] || [ -f "$runs/$name/student/metrics.json" ]; then
      tar czf "$out/$name.tgz" -C "$runs" --exclude checkpoints/epochs --exclude checkpoints/last.ckpt \
        --exclude checkpoints/best.ckpt --exclude synthetic/chunks "$name"
      echo "$name: done, packed into $out/$name.tgz" >&2
    else
      echo "$name: not finished" >&2
    fi
  done
}

case ${1:-} in
  start) shift; start "$@" ;;
  job) shift; run_job "$@" ;;
  wait) shift; follow "$@" ;;
  *) echo "usage: gpu.sh start RUNS JOB... | gpu.sh wait RUNS SECONDS OUT" >&2; exit 1 ;;
esac
