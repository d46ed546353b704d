"""What a task writes and prints: metrics.json, translations and references (each written whole),
tokenized BLEU, and the summary on the terminal."""

import json
import math
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

from transformer_mt.atomic import atomic_file
from transformer_mt.training.results import EvalResults, ScoredSentence


def finite_or_none(value):
    """JSON has no NaN or infinity: such numbers become null (recursively)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite_or_none(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite_or_none(v) for v in value]
    return value


def write_json(path: Path, data: dict) -> None:
    """Valid JSON (NaN and infinities written as null), written whole."""
    with atomic_file(path) as tmp:
        tmp.write_text(json.dumps(finite_or_none(data), indent=2, sort_keys=True, allow_nan=False) + "\n",
                       encoding="utf-8")


def write_translations(path: Path, rows: tuple[ScoredSentence, ...], field: str = "hypothesis") -> None:
    """One hypothesis (or reference) per line, in the order of the input file."""
    with atomic_file(path) as tmp:
        tmp.write_text("".join(getattr(row, field) + "\n" for row in rows), encoding="utf-8")


def named_sets(results: dict[str, EvalResults], stage: str, split: str | None = None) -> dict[str, EvalResults]:
    """A stage's named sets (the module's `results` of `STAGE/NAME`): {NAME: results}, their metrics
    named `SPLIT/NAME/...` (SPLIT: `stage` by default)."""
    return {key.split("/", 1)[1]: each.renamed(stage, split or stage) for key, each in results.items()
            if key.startswith(f"{stage}/")}


def write_results(output_dir: Path, stage: str, results: EvalResults, extra: dict,
                  sets: dict[str, EvalResults] | None = None) -> dict:
    """metrics.json, `{stage}.translations.txt` and `{stage}.references.txt` (the references as
    scored, for significance tests: task=report) in the run directory, each written whole; with
    named `sets` (several corpora), their metrics too and `{stage}.NAME.translations.txt` and
    `{stage}.NAME.references.txt`, listed under `sets`. Returns the metrics."""
    output_dir.mkdir(parents=True, exist_ok=True)
    metrics = {**results.metrics, "bleu_signature": results.bleu_signature,
               "chrf_signature": results.chrf_signature, "ter_signature": results.ter_signature, **extra}
    for named in (sets or {}).values():
        metrics.update(named.metrics)
    metrics["translations"], metrics["references"] = write_rows(output_dir, stage, results)
    if sets:
        metrics["sets"] = {name: dict(zip(("translations", "references"), write_rows(output_dir, f"{stage}.{name}",
                                                                                      named)))
                           for name, named in sets.items()}
    write_json(output_dir / "metrics.json", metrics)
    return metrics


def write_rows(output_dir: Path, stem: str, results: EvalResults) -> tuple[str, str]:
    """`STEM.translations.txt` and `STEM.references.txt` of one set, each written whole; their paths."""
    translations, references = output_dir / f"{stem}.translations.txt", output_dir / f"{stem}.references.txt"
    write_translations(translations, results.rows)
    write_translations(references, results.rows, "reference")
    return str(translations), str(references)



def read_test_set(run_dir: Path, name: str | None = None) -> tuple[list[str], list[str]]:
    """The test translations and references a run wrote (write_results): its first set's, or those of
    its named set `name` (a ValueError naming the sets it has, when it has no such set)."""
    metrics = json.loads((run_dir / "metrics.json").read_text(encoding="utf-8"))
    sets = metrics.get("sets", {})
    if name and name not in sets:
        raise ValueError(f"{run_dir}/metrics.json has no test set {name!r} (sets: {', '.join(sets)})")
    files = sets[name] if name else metrics
    return tuple(Path(files[key]).read_text(encoding="utf-8").splitlines() for key in ("translations", "references"))


def tokenized_bleu_extra(split: str, rows: tuple[ScoredSentence, ...], mode: bool | str = True,
                         sets: dict[str, EvalResults] | None = None) -> dict:
    """task.tokenized_bleu: with true, `<split>/bleu_tok_lc` (13a-tokenized, lowercased BLEU); with
    compound, `<split>/bleu_tok_compound` (the paper's: tokenized, hyphenated compounds split); each
    named set of `sets` its own (`<split>/NAME/bleu_tok_lc`); and the signature. (The schema has
    checked the value: schema.shared.Scored.)"""
    extra = tokenized_bleu_of(split, rows, mode)
    for name, named in (sets or {}).items():
        extra.update(tokenized_bleu_of(f"{split}/{name}", named.rows, mode))
    return extra


def tokenized_bleu_of(prefix: str, rows: tuple[ScoredSentence, ...], mode: bool | str) -> dict:
    """One set's tokenized BLEU (`PREFIX/bleu_tok_lc` or `PREFIX/bleu_tok_compound`) and its signature."""
    from transformer_mt.evaluation.metrics import compound_split_bleu, tokenized_lowercased_bleu

    hyps, refs = [r.hypothesis for r in rows], [r.reference for r in rows]
    if mode == "compound":
        scores = compound_split_bleu(hyps, refs)
        return {f"{prefix}/bleu_tok_compound": scores["bleu_tok_compound"],
                "bleu_tok_compound_signature": scores["bleu_tok_compound_signature"]
                + " (13a-tokenized, compounds split as get_ende_bleu.sh)"}
    scores = tokenized_lowercased_bleu(hyps, refs)
    return {f"{prefix}/bleu_tok_lc": scores["bleu_tok_lc"],
            "bleu_tok_lc_signature": scores["bleu_tok_lc_signature"] + " (13a-tokenized, lowercased)"}


def print_summary(title: str, metrics: dict, rows: tuple[ScoredSentence, ...], samples: int = 3) -> None:
    """Final metrics and a few translations, for the terminal; into a pipe or a file, lines are never
    cut at rich's default 80 columns (paths, sacreBLEU signatures)."""
    console = Console() if sys.stdout.isatty() else Console(width=10_000)
    table = Table(title=title, show_header=False)
    for key, value in metrics.items():
        table.add_row(key, f"{value:.2f}" if isinstance(value, float) else str(value))
    console.print(table)
    for row in rows[:samples]:
        console.print(f"[bold]src[/bold] {row.source}\n[bold]ref[/bold] {row.reference}\n"
                      f"[bold]hyp[/bold] {row.hypothesis}\n", highlight=False)
