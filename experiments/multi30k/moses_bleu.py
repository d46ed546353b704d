"""The same translations scored three ways: cased detokenized sacreBLEU (13a), sacreBLEU on
13a-tokenized lowercased text (`task.tokenized_bleu`), and BLEU on lowercased Moses-tokenized
text, as fairseq papers on Multi30k report it (Moses `tokenizer.perl -l de` on references and
output, BPE removed, multi-bleu-style BLEU on the tokens).

    pip install sacremoses    # this script only
    python experiments/multi30k/moses_bleu.py --hyp outputs/train/<run>/test.translations.txt \\
        --ref $DATA_DIR/multi30k/test2016.de
"""

import argparse
import sys
from pathlib import Path

import sacrebleu

from transformer_mt.markdown import markdown_table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hyp", required=True, help="translations, one per line")
    parser.add_argument("--ref", required=True, help="references, one per line")
    parser.add_argument("--lang", default="de", help="Moses tokenizer language")
    args = parser.parse_args()
    try:
        from sacremoses import MosesPunctNormalizer, MosesTokenizer
    except ImportError:
        sys.exit("error: this script needs sacremoses: pip install sacremoses")
    hyps = Path(args.hyp).read_text(encoding="utf-8").splitlines()
    refs = Path(args.ref).read_text(encoding="utf-8").splitlines()
    if len(hyps) != len(refs):
        sys.exit(f"error: {args.hyp} has {len(hyps)} lines, {args.ref} has {len(refs)}")
    normalize, tokenizer = MosesPunctNormalizer(lang=args.lang), MosesTokenizer(lang=args.lang)

    def moses(lines: list[str]) -> list[str]:
        return [tokenizer.tokenize(normalize.normalize(line.lower()), return_str=True, escape=False) for line in lines]

    scores = {
        "sacreBLEU, cased, detokenized (13a)": sacrebleu.corpus_bleu(hyps, [refs]),
        "13a-tokenized, lowercased (task.tokenized_bleu)": sacrebleu.corpus_bleu(
            hyps, [refs], lowercase=True, smooth_method="none"),
        "Moses-tokenized, lowercased (fairseq papers)": sacrebleu.corpus_bleu(
            moses(hyps), [moses(refs)], tokenize="none", smooth_method="none", force=True),
    }
    rows = [[name, f"{score.score:.2f}"] for name, score in scores.items()]
    print(f"{len(hyps)} sentences\n\n" + markdown_table(["BLEU on", "score"], rows, right=(1,)))


if __name__ == "__main__":
    main()
