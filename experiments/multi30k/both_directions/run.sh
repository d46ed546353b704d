#!/usr/bin/env bash
# Issue 49's both-directions model on Multi30k and the one-direction recipes it is compared with, at
# the same step budget: STEPS (default the recipe's 8,811; a fraction of it is one option away). Two
# lanes of one thread (lanes.sh: a finished job is skipped, a stopped one resumed from its last.ckpt,
# so the script can be stopped and run again): `both` beside `en_de`, then `de_en` on both cores. At
# the full budget `en_de` is the recipe's published run (multi30k_en_de.ckpt) and is not trained again.
# experiments/multi30k/gpu.sh sources it for the same jobs on a GPU.
#   DATA_DIR=../shared/data [STEPS=2203] bash experiments/multi30k/both_directions/run.sh RUNS
# RUNS/both: en->de tagged 2de and de->en tagged 2en in one model; RUNS/de_en, RUNS/en_de: the recipe.
# The both model's epoch holds both directions (twice the recipe's), so it averages its last 5 epoch
# checkpoints: the same span of steps as the recipe's last 10.
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/../../.."
DE_EN='{_target_: transformer_mt.data.TextFileCorpus, data_dir: ${paths.data_dir}/multi30k, src_lang: de, tgt_lang: en, splits: {train: train, val: val, test: test2016}, tag: 2en}'
STEPS=${STEPS:-8811}
BOTH=(experiment=multi30k_recipe data.corpus.tag=2de "+data.corpora.de_en=$DE_EN" task.last_n=5
      "trainer.max_steps=$STEPS")
DE_EN_RECIPE=(experiment=multi30k_recipe data.corpus.src_lang=de data.corpus.tgt_lang=en "trainer.max_steps=$STEPS")
EN_DE_RECIPE=(experiment=multi30k_recipe "trainer.max_steps=$STEPS")
[ "${BASH_SOURCE[0]}" != "$0" ] && return 0  # sourced: the two jobs' overrides alone

if [ $# -ne 1 ]; then
  echo "usage: run.sh RUNS" >&2
  exit 1
fi
RUNS=$1
source experiments/multi30k/lanes.sh
both() { job "$RUNS/both" "${BOTH[@]}" "${VAL[@]}"; }
en_de() { [ "$STEPS" = 8811 ] || job "$RUNS/en_de" "${EN_DE_RECIPE[@]}" "${VAL[@]}"; }
de_en() { JOB_THREADS=2 job "$RUNS/de_en" "${DE_EN_RECIPE[@]}" "${VAL[@]}"; }
# VAL: validation of one batch a set (the tested average does not depend on it), unless told otherwise
read -r -a VAL <<< "${VAL_OVERRIDES:-trainer.limit_val_batches=1}"
lanes both en_de
de_en
