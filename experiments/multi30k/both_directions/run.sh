#!/usr/bin/env bash
# Issue 49's both-directions model on Multi30k, at the recipe's full budget (8,811 steps), and the
# one-direction de->en recipe it is compared with (en->de: the recipe's published run), in two lanes
# of one thread (lanes.sh: a finished job is skipped, a stopped one resumed from its last.ckpt, so
# the script can be stopped and run again; about 3.3 hours a lane).
#   DATA_DIR=../shared/data bash experiments/multi30k/both_directions/run.sh RUNS
# RUNS/both: en->de tagged 2de and de->en tagged 2en in one model; RUNS/de_en: the recipe de->en.
set -u
cd "$(dirname "$0")/../../.."
if [ $# -ne 1 ]; then
  echo "usage: run.sh RUNS" >&2
  exit 1
fi
RUNS=$1
source experiments/multi30k/lanes.sh
DE_EN='{_target_: transformer_mt.data.TextFileCorpus, data_dir: ${paths.data_dir}/multi30k, src_lang: de, tgt_lang: en, splits: {train: train, val: val, test: test2016}, tag: 2en}'

both() { job "$RUNS/both" experiment=multi30k_recipe data.corpus.tag=2de "+data.corpora.de_en=$DE_EN"; }
de_en() { job "$RUNS/de_en" experiment=multi30k_recipe data.corpus.src_lang=de data.corpus.tgt_lang=en; }
lanes both de_en
