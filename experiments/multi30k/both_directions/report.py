"""Issue 49's both-directions model against the one-direction recipes, per direction, as a Markdown
table: BLEU on 13a-tokenized lowercased text, sacreBLEU cased (13a), chrF, and the off-target rate
(the share of outputs py3langid places in the other language, deciding between de and en only),
with the references' own rate beside it: what the identifier gets wrong on correct text.

    python experiments/multi30k/both_directions/report.py RUNS

RUNS holds run.sh's runs: `both` (en->de its first test set, de->en its set `de_en`), `de_en` and
`en_de` (without it, the shipped recipe's test2016 translations, experiments/multi30k/test2016.beam5.de).
"""

import argparse
from pathlib import Path

from transformer_mt.evaluation.metrics import corpus_scores, tokenized_lowercased_bleu
from transformer_mt.evaluation.off_target import off_target_rate
from transformer_mt.markdown import markdown_table
from transformer_mt.tasks.runs.outputs import read_test_set

SHIPPED = Path(__file__).resolve().parent.parent / "test2016.beam5.de"
LANGUAGES = ("de", "en")


def row(system: str, hypotheses: list[str], references: list[str], language: str) -> list[str]:
    """One system's row of the table."""
    if len(hypotheses) != len(references):
        raise SystemExit(f"error: {system}: {len(hypotheses)} translations for {len(references)} references")
    scores = corpus_scores(hypotheses, references)
    tok_lc = tokenized_lowercased_bleu(hypotheses, references)["bleu_tok_lc"]
    off = off_target_rate(hypotheses, language, LANGUAGES)
    return [system, f"{tok_lc:.2f}", f"{scores['bleu']:.2f}", f"{scores['chrf']:.2f}", f"{off:.1f}%"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", type=Path)
    runs = parser.parse_args().runs
    both_en_de, references_de = read_test_set(runs / "both")
    both_de_en, references_en = read_test_set(runs / "both", "de_en")
    if (runs / "en_de" / "metrics.json").is_file():
        en_de, recipe_en_de = read_test_set(runs / "en_de")[0], "the en->de recipe"
    else:
        en_de, recipe_en_de = SHIPPED.read_text(encoding="utf-8").splitlines(), "the en->de recipe (shipped)"
    de_en = read_test_set(runs / "de_en")[0]
    rows = []
    for direction, recipe, one, both, references, language in (
            ("en->de", recipe_en_de, en_de, both_en_de, references_de, "de"),
            ("de->en", "the de->en recipe", de_en, both_de_en, references_en, "en")):
        rows += [row(f"{direction}, {recipe}", one, references, language),
                 row(f"{direction}, the both-directions model", both, references, language),
                 [f"{direction}, the references", "", "", "",
                  f"{off_target_rate(references, language, LANGUAGES):.1f}%"]]
    columns = ["direction, system", "BLEU tok. lc", "sacreBLEU cased", "chrF", "off-target"]
    print(markdown_table(columns, rows, right=(1, 2, 3, 4)))


if __name__ == "__main__":
    main()
