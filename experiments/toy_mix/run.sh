#!/usr/bin/env bash
# experiment=toy_mix's variants, each into OUT/NAME, then their test scores as a Markdown table:
#   bash experiments/toy_mix/run.sh OUT
set -eu
cd "$(dirname "$0")/../.."
OUT=${1:?usage: run.sh OUT}
# ckpt_path=last: a finished variant is left as it is, a stopped one resumed
RUN=(python3 run.py experiment=toy_mix ckpt_path=last)
"${RUN[@]}" '~data.corpora.other' "hydra.run.dir=$OUT/in_domain_alone" > /dev/null
"${RUN[@]}" "hydra.run.dir=$OUT/mixed" > /dev/null
"${RUN[@]}" data.corpora.toy.weight=10 "hydra.run.dir=$OUT/in_domain_x10" > /dev/null
"${RUN[@]}" data.corpora.other.weight=0.1 "hydra.run.dir=$OUT/other_x0.1" > /dev/null
"${RUN[@]}" data.corpora.other.tag=null "hydra.run.dir=$OUT/mixed_untagged" > /dev/null
python3 - "$OUT" <<'PY'
import json
import sys
from pathlib import Path

import yaml

from transformer_mt.markdown import markdown_table

rows = []
for name in ("in_domain_alone", "mixed", "in_domain_x10", "other_x0.1", "mixed_untagged"):
    run = Path(sys.argv[1]) / name
    metrics = json.loads((run / "metrics.json").read_text())
    shares = yaml.safe_load((run / "csv" / "hparams.yaml").read_text())["epoch_composition"]
    pairs = " : ".join(str(shares[corpus]["pairs"]) for corpus in ("main", "other") if corpus in shares)
    other = metrics.get("test/other/bleu")
    rows.append([name, pairs, f"{metrics['test/bleu']:.2f}", "-" if other is None else f"{other:.2f}"])
print(markdown_table(["variant", "pairs an epoch (in-domain : other)", "test BLEU, in-domain",
                      "test BLEU, other (copy)"], rows))
PY
