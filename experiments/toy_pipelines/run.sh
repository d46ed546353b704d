#!/usr/bin/env bash
# Issue 50's pipelines on the toy corpus, what each buys (experiments/toy_pipelines/README.md):
# the default job as the teacher, task=distill into a student of the same size and into a smaller
# one (against the smaller model trained on the original pairs), and task=backtranslate from 1,000
# (or 300) parallel pairs plus 9,000 target-side sentences (against those pairs alone), at the
# default job's epoch budget and at 1,500 steps. Each command goes on where it stopped when the
# script is run again (the training runs by ckpt_path=last, the pipelines by their stages).
#   bash experiments/toy_pipelines/run.sh OUT
set -eu
cd "$(dirname "$0")/../.."
OUT=${1:?usage: run.sh OUT}
SMALL=(model.d_model=32 model.d_ff=128)
run() { python3 run.py progress=false "$@" > "$OUT/$(basename "${@: -1}").log" 2>&1; }  # its output: OUT/NAME.log
mkdir -p "$OUT"
run ckpt_path=last "hydra.run.dir=$OUT/teacher"
run "${SMALL[@]}" ckpt_path=last "hydra.run.dir=$OUT/small"
run task=distill "task.teacher=$OUT/teacher" "task.baseline=$OUT/teacher" "hydra.run.dir=$OUT/distill_same"
run task=distill "task.teacher=$OUT/teacher" "task.baseline=$OUT/small" "${SMALL[@]}" "hydra.run.dir=$OUT/distill_small"
python3 -c "from transformer_mt.data.toy import ToyCorpus
lines = ToyCorpus(num_train=9000, num_val=0, num_test=0, seed=5).load('train').tgt
open('$OUT/mono.txt', 'w').write(''.join(line + '\n' for line in lines))"
run task=backtranslate "task.monolingual=$OUT/mono.txt" data.corpora.toy.num_train=1000 "hydra.run.dir=$OUT/backtranslate"
STEPS=(trainer.max_epochs=-1 trainer.max_steps=1500 trainer.check_val_every_n_epoch=null trainer.val_check_interval=500)
run task=backtranslate "task.monolingual=$OUT/mono.txt" data.corpora.toy.num_train=1000 "${STEPS[@]}" \
  "hydra.run.dir=$OUT/backtranslate_steps"
run task=backtranslate "task.monolingual=$OUT/mono.txt" data.corpora.toy.num_train=300 "${STEPS[@]}" \
  "hydra.run.dir=$OUT/backtranslate_300"
run task=backtranslate "task.monolingual=$OUT/mono.txt" data.corpora.toy.num_train=300 "${STEPS[@]}" task.weight=0.1 \
  "task.reverse=$OUT/backtranslate_300/reverse" "task.baseline=$OUT/backtranslate_300/baseline" \
  "hydra.run.dir=$OUT/backtranslate_300_w01"
