#!/usr/bin/env bash
# The wheels a GPU machine needs and lacks (../shared/gpu/README.md), for python 3.12, in .gpu-wheels/
# (git-ignored; carry it): hydra-core, omegaconf, antlr4 (built here: it has no wheel), xxhash,
# ctranslate2, liger-kernel (loss_speed.py's peer: pure Python on the image's torch and triton, 0.9 MB),
# py3langid (the off-target rate of a run with several target languages, 4.6 MB),
# and three releases of datasets with the dill and multiprocess each needs, one folder
# each, because the machine's pyarrow and huggingface_hub are not known before it starts: run.py's
# install step takes datasets-5 (pyarrow >= 24, hub >= 1.31), datasets-4.4 (pyarrow >= 21, hub < 2)
# or datasets-4.0 (pyarrow >= 15). About 50 MB, 41 of them ctranslate2.
#   bash experiments/gpu/wheels.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
out=.gpu-wheels
rm -rf "$out" && mkdir -p "$out"
grep -qxF "/$out/" .git/info/exclude 2>/dev/null || echo "/$out/" >>.git/info/exclude
get() {  # get FOLDER PACKAGES...: binary wheels for CPython 3.12 on x86-64 Linux
  pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
    -d "$1" "${@:2}"
}
get "$out" hydra-core==1.3.* "omegaconf<2.4" xxhash ctranslate2==4.* liger-kernel "py3langid>=0.4"
pip wheel -q --no-deps -w "$out" "antlr4-python3-runtime==4.9.3"
get "$out/datasets-5" datasets==5.* "dill<0.4.2" "multiprocess<0.70.20"
get "$out/datasets-4.4" datasets==4.4.* "dill<0.4.1" "multiprocess<0.70.19"
get "$out/datasets-4.0" datasets==4.0.* "dill<0.3.9" "multiprocess<0.70.17"
find "$out" -name '*.whl' | sort
du -sh "$out"
