"""The Multi30k experiments' tables and figures beside the framework's `task=report`, one
subcommand each (`python experiments/multi30k/tables.py SUBCOMMAND --help` says more):

    # two runs' test translations against each other: sacreBLEU's paired tests (issue 38)
    python experiments/multi30k/tables.py paired BASE_RUN SYSTEM_RUN [--metric bleu chrf ter bleu_tok_lc]
        [--base-set NAME] [--system-set NAME]
    # run folders' scores as one table (issue 51)
    python experiments/multi30k/tables.py scores LABEL=RUN [LABEL=RUN ...]
    # translations' BLEU three ways, Moses-tokenized as fairseq papers among them (needs sacremoses)
    python experiments/multi30k/tables.py moses --hyp FILE --ref FILE [--lang de]
    # the both-directions model against the one-direction recipes (issue 49)
    python experiments/multi30k/tables.py directions RUNS
    # a distilled corpus against the original targets (issue 51)
    python experiments/multi30k/tables.py corpus ORIGINAL_TARGETS DISTILLED_TARGETS
    # several training runs' learning curves in one figure (issue 51)
    python experiments/multi30k/tables.py curves OUT.png LABEL=RUN [LABEL=RUN ...]

Tables are Markdown (transformer_mt.markdown); a user's mistake stops a subcommand in one line
(`error: ...`, exit status 1).
"""

import argparse
import csv
import inspect
import json
import sys
from collections import Counter
from pathlib import Path

from transformer_mt import plots
from transformer_mt.markdown import markdown_table

SHIPPED = Path(__file__).resolve().parent / "test2016.beam5.de"
LANGUAGES = ("de", "en")
SCORE_COLUMNS = ("bleu_tok_lc", "bleu", "chrf", "ter")


def outputs(run: Path, name: str | None = None) -> tuple[list[str], list[str]]:
    """A run's test translations and references: its first set's, or those of its set `name`."""
    from transformer_mt.tasks.runs.outputs import read_test_set

    try:
        return read_test_set(run, name)
    except ValueError as error:
        sys.exit(f"error: {error}")


def paired(args: argparse.Namespace) -> None:
    """Two systems' test translations against each other with sacreBLEU's paired tests (issue 38: the
    ensemble against the published single model).

    BASE_RUN and SYSTEM_RUN are run folders of `task=evaluate` (or of a training run): their
    metrics.json names the test translations and references, which must be the same references (a
    run's first test set, or its named set NAME: a run of several corpora, issue 49). Prints
    per metric (default: all four; bleu_tok_lc is BLEU on 13a-tokenized lowercased text, the score the
    older papers give) both scores, the difference with its 95% confidence interval, and the p-values
    of the paired bootstrap (1,000 resamples) and of approximate randomization (10,000 trials), as
    task=report computes them (transformer_mt/evaluation/significance.py)."""
    from transformer_mt.evaluation.significance import METRICS, paired_test

    unknown = [m for m in args.metric or () if m not in METRICS]
    if unknown:
        sys.exit(f"error: --metric {' '.join(unknown)}: the metrics are {', '.join(METRICS)}")
    args.metric = args.metric or list(METRICS)
    (base, refs), (system, other_refs) = outputs(args.base, args.base_set), outputs(args.system, args.system_set)
    if refs != other_refs:
        sys.exit(f"error: {args.base} and {args.system} were scored on different references")
    rows = []
    for metric in args.metric:
        r = paired_test(base, system, refs, metric=metric)
        rows.append([metric, f"{r.baseline:.2f}", f"{r.system:.2f}",
                     f"{r.delta:+.2f} [{r.ci_low:+.2f}, {r.ci_high:+.2f}]", f"{r.p_bootstrap:.4f}",
                     f"{r.p_randomization:.4f}", "yes" if r.significant else "no"])
    columns = ["metric", "base", "system", "difference (95% CI)", "p bootstrap", "p AR", "both p < 0.05"]
    print(markdown_table(columns, rows, right=(1, 2, 3, 4, 5)))


def score_row(label: str, run: Path) -> list[str]:
    """One table row: the label, the split and its four scores (a dash for one the run lacks)."""
    try:
        metrics = json.loads((run / "metrics.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        sys.exit(f"error: {run}/metrics.json: no such file (an unfinished run?)")
    split = metrics.get("split", "test")
    cells = [f"{metrics[f'{split}/{c}']:.2f}" if f"{split}/{c}" in metrics else "-" for c in SCORE_COLUMNS]
    return [label, split, *cells]


def scores(args: argparse.Namespace) -> None:
    """Run folders' scores as one markdown table (issue 51: the choices made on val, then the test).

    RUN is a run folder of `task=evaluate` (its split: `data.split`) or of a training run (its test):
    a row per run with the label, the split, BLEU on 13a-tokenized lowercased text (`task.tokenized_bleu`;
    a dash without it), sacreBLEU cased BLEU, chrF and TER. A folder without metrics.json stops the
    script in one line naming it."""
    rows = []
    for each in args.runs:
        label, _, run = each.partition("=")
        if not run:
            sys.exit(f"error: {each}: give LABEL=RUN, RUN a run folder")
        rows.append(score_row(label, Path(run)))
    columns = ["system", "split", "BLEU, 13a-tokenized lowercased", "sacreBLEU cased", "chrF", "TER"]
    print(markdown_table(columns, rows, right=(2, 3, 4, 5)))


def moses(args: argparse.Namespace) -> None:
    """The same translations scored three ways: cased detokenized sacreBLEU (13a), sacreBLEU on
    13a-tokenized lowercased text (`task.tokenized_bleu`), and BLEU on lowercased Moses-tokenized
    text, as fairseq papers on Multi30k report it (Moses `tokenizer.perl -l de` on references and
    output, BPE removed, multi-bleu-style BLEU on the tokens). It needs sacremoses (pip install
    sacremoses), this subcommand only."""
    import sacrebleu

    try:
        from sacremoses import MosesPunctNormalizer, MosesTokenizer
    except ImportError:
        sys.exit("error: this script needs sacremoses: pip install sacremoses")
    hyps = Path(args.hyp).read_text(encoding="utf-8").splitlines()
    refs = Path(args.ref).read_text(encoding="utf-8").splitlines()
    if len(hyps) != len(refs):
        sys.exit(f"error: {args.hyp} has {len(hyps)} lines, {args.ref} has {len(refs)}")
    normalize, tokenizer = MosesPunctNormalizer(lang=args.lang), MosesTokenizer(lang=args.lang)

    def tokenized(lines: list[str]) -> list[str]:
        return [tokenizer.tokenize(normalize.normalize(line.lower()), return_str=True, escape=False) for line in lines]

    bleus = {
        "sacreBLEU, cased, detokenized (13a)": sacrebleu.corpus_bleu(hyps, [refs]),
        "13a-tokenized, lowercased (task.tokenized_bleu)": sacrebleu.corpus_bleu(
            hyps, [refs], lowercase=True, smooth_method="none"),
        "Moses-tokenized, lowercased (fairseq papers)": sacrebleu.corpus_bleu(
            tokenized(hyps), [tokenized(refs)], tokenize="none", smooth_method="none", force=True),
    }
    rows = [[name, f"{score.score:.2f}"] for name, score in bleus.items()]
    print(f"{len(hyps)} sentences\n\n" + markdown_table(["BLEU on", "score"], rows, right=(1,)))


def direction_row(system: str, hypotheses: list[str], references: list[str], language: str) -> list[str]:
    """One system's row of the directions table."""
    from transformer_mt.evaluation.metrics import corpus_scores, tokenized_lowercased_bleu
    from transformer_mt.evaluation.off_target import off_target_rate

    if len(hypotheses) != len(references):
        raise SystemExit(f"error: {system}: {len(hypotheses)} translations for {len(references)} references")
    bleus = corpus_scores(hypotheses, references)
    tok_lc = tokenized_lowercased_bleu(hypotheses, references)["bleu_tok_lc"]
    off = off_target_rate(hypotheses, language, LANGUAGES)
    return [system, f"{tok_lc:.2f}", f"{bleus['bleu']:.2f}", f"{bleus['chrf']:.2f}", f"{off:.1f}%"]


def run_test_set(run: Path, name: str | None = None) -> tuple[list[str], list[str]]:
    """A run folder's test translations and references (its named set `name`), or one line and exit
    status 1 when the folder holds no finished run or no such set."""
    from transformer_mt.tasks.runs.outputs import read_test_set

    try:
        return read_test_set(run, name)
    except FileNotFoundError as err:
        raise SystemExit(f"error: {run}: no finished run ({err.filename} is missing)") from None
    except ValueError as err:
        raise SystemExit(f"error: {err}") from None


def directions(args: argparse.Namespace) -> None:
    """Issue 49's both-directions model against the one-direction recipes, per direction, as a Markdown
    table: BLEU on 13a-tokenized lowercased text, sacreBLEU cased (13a), chrF, and the off-target rate
    (the share of outputs py3langid places in the other language, deciding between de and en only),
    with the references' own rate beside it: what the identifier gets wrong on correct text.

    RUNS holds both_directions/run.sh's runs: `both` (en->de its first test set, de->en its set `de_en`),
    `de_en` and `en_de` (without it, the shipped recipe's test2016 translations,
    experiments/multi30k/test2016.beam5.de)."""
    from transformer_mt.evaluation.off_target import off_target_rate

    runs = args.runs
    both_en_de, references_de = run_test_set(runs / "both")
    both_de_en, references_en = run_test_set(runs / "both", "de_en")
    if (runs / "en_de" / "metrics.json").is_file():
        en_de, recipe_en_de = run_test_set(runs / "en_de")[0], "the en->de recipe"
    else:
        en_de, recipe_en_de = SHIPPED.read_text(encoding="utf-8").splitlines(), "the en->de recipe (shipped)"
    de_en = run_test_set(runs / "de_en")[0]
    rows = []
    for direction, recipe, one, both, references, language in (
            ("en->de", recipe_en_de, en_de, both_en_de, references_de, "de"),
            ("de->en", "the de->en recipe", de_en, both_de_en, references_en, "en")):
        rows += [direction_row(f"{direction}, {recipe}", one, references, language),
                 direction_row(f"{direction}, the both-directions model", both, references, language),
                 [f"{direction}, the references", "", "", "",
                  f"{off_target_rate(references, language, LANGUAGES):.1f}%"]]
    columns = ["direction, system", "BLEU tok. lc", "sacreBLEU cased", "chrF", "off-target"]
    print(markdown_table(columns, rows, right=(1, 2, 3, 4)))


def corpus_stats(lines: list[str]) -> dict[str, float]:
    """A corpus's lines, words, words a line, distinct words and words seen once."""
    counts = Counter(word for line in lines for word in line.split())
    words = sum(counts.values())
    return {"lines": len(lines), "words": words, "words a line": words / len(lines), "distinct words": len(counts),
            "words seen once": sum(1 for c in counts.values() if c == 1)}


def corpus(args: argparse.Namespace) -> None:
    """A distilled corpus against the original one it was translated from (issue 51): lines, words per
    line, the length ratio, the vocabulary (distinct words, and those seen once) and how many targets
    equal the reference, as a Markdown table. Words are whitespace-separated, as written."""
    original, distilled = (p.read_text(encoding="utf-8").splitlines() for p in (args.original, args.distilled))
    if len(original) != len(distilled):
        raise SystemExit(f"error: {args.original} has {len(original)} lines, {args.distilled} {len(distilled)}")
    a, b = corpus_stats(original), corpus_stats(distilled)
    rows = [[key, f"{a[key]:,.2f}", f"{b[key]:,.2f}"] if key == "words a line" else [key, f"{a[key]:,}", f"{b[key]:,}"]
            for key in a]
    same = sum(x.strip() == y.strip() for x, y in zip(original, distilled))
    rows += [["length ratio (distilled / original words)", "", f"{b['words'] / a['words']:.3f}"],
             ["targets equal to the reference", "", f"{same:,} ({100 * same / len(original):.1f}%)"]]
    print(markdown_table(["", "original", "distilled"], rows, right=(1, 2)))


def curves(args: argparse.Namespace) -> None:
    """The learning curves of several training runs in one figure (issue 51: the students against the
    teacher's members): train loss, val loss and val BLEU against the step, as each run's
    plots/curves.csv recorded them (a pipeline's student: its student/ folder). The figure's title is
    OUT's name; a line per run says what was drawn of it (each curve's points, its first and last step:value)."""
    given = {}
    for each in args.runs:
        label, _, folder = each.partition("=")
        given[label] = Path(folder) / "plots" / "curves.csv"
        if not folder or not given[label].is_file():
            sys.exit(f"error: {each}: no {given[label]} (give LABEL=RUN, RUN a training run's folder)")
    runs = {label: {} for label in given}
    for label, curves_csv in given.items():  # as training/curves.py writes it (read_curves, without Lightning's import)
        with open(curves_csv, newline="", encoding="utf-8") as f:
            for row in csv.DictReader(f):
                runs[label].setdefault(row["metric"], []).append((int(row["step"]), float(row["value"])))
    plots.save(plots.curves_figure(runs, args.out.stem), args.out)
    for label, series in runs.items():
        print(f"{args.out.stem}: {label}: " + "; ".join(f"{name} {len(points)} points {points[0][0]}:{points[0][1]:g}"
                                                        f" .. {points[-1][0]}:{points[-1][1]:g}"
                                                        for name, points in series.items()))


def about(function) -> dict:
    """A subparser's description (its function's docstring, as written) for add_parser."""
    return {"description": inspect.cleandoc(function.__doc__), "formatter_class": argparse.RawDescriptionHelpFormatter}


def argument_parser() -> argparse.ArgumentParser:
    """The parser of every subcommand."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="SUBCOMMAND")
    each = subparsers.add_parser("paired", help="two runs' translations: sacreBLEU's paired tests", **about(paired))
    each.add_argument("base", type=Path)
    each.add_argument("system", type=Path)
    each.add_argument("--metric", nargs="+", help="bleu, chrf, ter, bleu_tok_lc (default: all four)")
    each.add_argument("--base-set", help="the base run's named test set (default: its first)")
    each.add_argument("--system-set", help="the system run's named test set (default: its first)")
    each = subparsers.add_parser("scores", help="run folders' scores as one table", **about(scores))
    each.add_argument("runs", nargs="+", metavar="LABEL=RUN")
    each = subparsers.add_parser("moses", help="BLEU three ways, Moses-tokenized too", **about(moses))
    each.add_argument("--hyp", required=True, help="translations, one per line")
    each.add_argument("--ref", required=True, help="references, one per line")
    each.add_argument("--lang", default="de", help="Moses tokenizer language")
    each = subparsers.add_parser("directions", help="the both-directions model, per direction", **about(directions))
    each.add_argument("runs", type=Path)
    each = subparsers.add_parser("corpus", help="a distilled corpus against the original one", **about(corpus))
    each.add_argument("original", type=Path)
    each.add_argument("distilled", type=Path)
    each = subparsers.add_parser("curves", help="several training runs' learning curves in one figure", **about(curves))
    each.add_argument("out", type=Path)
    each.add_argument("runs", nargs="+", metavar="LABEL=RUN")
    return parser


def main() -> None:
    args = argument_parser().parse_args()
    subcommands = {"paired": paired, "scores": scores, "moses": moses, "directions": directions, "corpus": corpus,
                   "curves": curves}
    subcommands[args.command](args)


if __name__ == "__main__":
    main()
