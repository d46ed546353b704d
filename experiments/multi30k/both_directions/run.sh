#!/usr/bin/env bash
# Issue 49's both-directions model on Multi30k, at the recipe's full budget (8,811 steps), and the
# one-direction de->en recipe it is compared with (en->de: the recipe's published run), in two lanes
# of one thread (lanes.sh: a finished job is skipped, a stopped one resumed from its last.ckpt, so
# the script can be stopped and run again; about 3.3 hours a lane). experiments/multi30k/gpu.sh
# sources it for the same two jobs on a GPU.
#   DATA_DIR=../shared/data bash experiments/multi30k/both_directions/run.sh RUNS
# RUNS/both: en->de tagged 2de and de->en tagged 2en in one model; RUNS/de_en: the recipe de->en.
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/../../.."
DE_EN='{_target_: transformer_mt.data.TextFileCorpus, data_dir: ${paths.data_dir}/multi30k, src_lang: de, tgt_lang: en, splits: {train: train, val: val, test: test2016}, tag: 2en}'
BOTH=(experiment=multi30k_recipe data.corpus.tag=2de "+data.corpora.de_en=$DE_EN")
DE_EN_RECIPE=(experiment=multi30k_recipe data.corpus.src_lang=de data.corpus.tgt_lang=en)
[ "${BASH_SOURCE[0]}" != "$0" ] && return 0  # sourced: the two jobs' overrides alone

if [ $# -ne 1 ]; then
  echo "usage: run.sh RUNS" >&2
  exit 1
fi
RUNS=$1
source experiments/multi30k/lanes.sh
both() { job "$RUNS/both" "${BOTH[@]}"; }
de_en() { job "$RUNS/de_en" "${DE_EN_RECIPE[@]}"; }
lanes both de_en
