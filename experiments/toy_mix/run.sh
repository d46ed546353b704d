#!/usr/bin/env bash
# experiment=toy_mix's variants, each into OUT/NAME, then their test scores as a Markdown table:
#   bash experiments/toy_mix/run.sh OUT
set -eu
cd "$(dirname "$0")/../.."
OUT=${1:?usage: run.sh OUT}
PYTHON=${PYTHON:-.venv/bin/python}
variant() {  # variant NAME OVERRIDE...: a finished variant (its metrics.json) is not run again
  local name=$1
  shift
  [ -f "$OUT/$name/metrics.json" ] || "$PYTHON" run.py experiment=toy_mix "hydra.run.dir=$OUT/$name" "$@" >/dev/null
}
variant in_domain_alone '~data.corpora.other'
variant mixed
variant in_domain_x10 data.corpus.weight=10
variant other_x0.1 data.corpora.other.weight=0.1
variant mixed_untagged data.corpora.other.tag=null
"$PYTHON" - "$OUT" <<'PY'
import json
import sys
from pathlib import Path

import yaml

print("| variant | pairs an epoch (in-domain : other) | test BLEU, in-domain | test BLEU, other (copy) |")
print("| --- | --- | --- | --- |")
for name in ("in_domain_alone", "mixed", "in_domain_x10", "other_x0.1", "mixed_untagged"):
    run = Path(sys.argv[1]) / name
    metrics = json.loads((run / "metrics.json").read_text())
    shares = yaml.safe_load((run / "csv" / "hparams.yaml").read_text())["epoch_composition"]
    pairs = " : ".join(str(shares[corpus]["pairs"]) for corpus in ("main", "other") if corpus in shares)
    other = metrics.get("test/other/bleu")
    print(f"| {name} | {pairs} | {metrics['test/bleu']:.2f} | {'-' if other is None else f'{other:.2f}'} |")
PY
