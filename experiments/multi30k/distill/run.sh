#!/usr/bin/env bash
# Issue 51's students: the recipe (experiment=multi30k_recipe) unchanged but for its data, trained by
# task=distill on the translations of the teacher, the ensemble of the three recipe models (seeds
# 1234 = the shipped model, 1235, 1236: full.sh trains them; MEMBERS is the folder of their runs), beam 5
# and length penalty 1.0. `distilled`: the teacher's translations alone; `distilled_orig`: and the
# original pairs (weight 1: each epoch shows both). The teacher's translations, the same for both, are
# made once: `distilled` runs alone on both cores until its synthetic stage is done, is then stopped
# (SIGTERM) and the stage copied to `distilled_orig`; then both train in two lanes of one thread
# (lanes.sh: the same command again goes on where it stopped, the student from its last.ckpt).
# experiments/multi30k/gpu.sh sources it for the same jobs on a GPU (NAME-sSEED: another seed).
# BASELINE: a run folder the students are tested against (the shipped model's task=evaluate run;
# none: no comparison).
#   MEMBERS=RUNS_OF_FULL_SH [BASELINE=RUN] DATA_DIR=../shared/data bash experiments/multi30k/distill/run.sh RUNS
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/../../.."
MEMBERS=${MEMBERS:-.gpu-members}
TEACHER="[experiments/multi30k/multi30k_en_de.ckpt,$MEMBERS/seed1235/checkpoints/average.ckpt,$MEMBERS/seed1236/checkpoints/average.ckpt]"
STUDENT=(task=distill experiment=multi30k_recipe "task.teacher=$TEACHER" ${BASELINE:+"task.baseline=$BASELINE"})
student() {  # student NAME[-sSEED]: that student's overrides in ARGS (status 1: no such student)
  local seed=${1##*-s}
  [ "$seed" = "$1" ] && seed=1234
  case ${1%-s*} in
    distilled) ARGS=("${STUDENT[@]}" "seed=$seed") ;;
    distilled_orig) ARGS=("${STUDENT[@]}" "seed=$seed" task.originals_weight=1.0) ;;
    *) return 1 ;;
  esac
}
synthetic_done() { grep -qs '"done": true' "$1/synthetic/stage.json"; }  # synthetic_done PIPELINE
share_synthetic() {  # share_synthetic FROM TO: FROM's finished synthetic stage made TO's (TO then does not
  # translate: the stage's fingerprint holds its files' digests); one TO already has is kept
  cmp -s "$1/synthetic/stage.json" "$2/synthetic/stage.json" && return 0
  mkdir -p "$2/synthetic" && cp "$1/synthetic/stage.json" "$1/synthetic/train.en" "$1/synthetic/train.de" "$2/synthetic/"
}
[ "${BASH_SOURCE[0]}" != "$0" ] && return 0  # sourced: STUDENT, student() and the two above alone

if [ $# -ne 1 ]; then
  echo "usage: run.sh RUNS" >&2
  exit 1
fi
RUNS=$1
source experiments/multi30k/lanes.sh
distilled() { student distilled && job "$RUNS/distilled" "${ARGS[@]}"; }
distilled_orig() { student distilled_orig && job "$RUNS/distilled_orig" "${ARGS[@]}"; }
translate_once() {  # distilled's synthetic stage on both cores, then stopped; the stage shared
  local lane status
  if ! synthetic_done "$RUNS/distilled"; then
    student distilled || return 1
    JOB_THREADS=2 job "$RUNS/distilled" "${ARGS[@]}" 2> /dev/null & lane=$!  # its stop is no failure
    until synthetic_done "$RUNS/distilled" || ! kill -0 "$lane" 2> /dev/null; do sleep 1; done
    pkill -TERM -P "$lane"  # run.py, the lane's child: its student resumes in the lanes below
    wait "$lane"
    status=$?
    if ! synthetic_done "$RUNS/distilled"; then
      echo "$RUNS/distilled: exit $status before its synthetic stage was done ($RUNS/distilled.log)" >&2
      return 1
    fi
    echo "$RUNS/distilled: the teacher's translations are done; both students train on them" >&2
  fi
  share_synthetic "$RUNS/distilled" "$RUNS/distilled_orig"
}
translate_once && lanes distilled distilled_orig
