"""task=lengths: a sweep's models on inputs longer than they trained on, BLEU by source length.

    python run.py task=lengths task.sweep_dir=outputs/ablation/positions_<date> \\
        task.source=DATA/multi30k/test2016.en task.reference=DATA/multi30k/test2016.de \\
        [task.joins=[1,2,3]] [task.buckets=[15,30,45,60]] [decoding=...]

The test set's sentences are joined n at a time for each n of `task.joins` (consecutive lines, a
space between them; evaluation/lengths.py), and every finished job of the sweep translates every
segment with the checkpoint its metrics.json says it tested, decoded as this command's `decoding`
says (greedy by default, as the ablations test). Each group of segments is scored with corpus BLEU
(sacreBLEU, as the runs' test/bleu): each joining (x1 is the test set itself, x2 its pairs, ...)
and each bucket of source length in words (`task.buckets`: the longest source of each bucket but
the last). The rows are the sweep's (task=report's: one per setting, its jobs the seeds, the base
row the sweep's own setting or `task.base_row`); each row's groups are tested against the base
row's seed by seed with sacreBLEU's paired tests, and marked by task=report's rule.
Writes into the sweep directory: `lengths/segments.tsv` (joins, first line, source words, bucket,
source, reference), `lengths/JOB.translations.txt` (one line a segment), `lengths.md`, `lengths.csv`
(the rows), `lengths_significance.csv` (the tests) and `lengths.png` (BLEU by length bucket, a line
per row, mean ± std over the seeds)."""

import logging
import statistics
from pathlib import Path

from hydra.utils import instantiate
from omegaconf import DictConfig
from sacrebleu.metrics import BLEU

from transformer_mt import plots
from transformer_mt.atomic import atomic_file
from transformer_mt.checkpoints.loading import task_device
from transformer_mt.errors import DataError
from transformer_mt.evaluation.lengths import (
    Segment,
    bucket_names,
    bucket_of,
    groups,
    segments,
)
from transformer_mt.evaluation.significance import PairedResult, paired_test
from transformer_mt.inference.line_translation import translate_lines
from transformer_mt.inference.members import load_translator
from transformer_mt.progress import ProgressBar
from transformer_mt.tasks.lines.pairs import aligned_files
from transformer_mt.tasks.runs.comparison import group_rows, spread, table_lines, verdict, write_csv
from transformer_mt.tasks.runs.sweep import Job, Row, read_sweep

log = logging.getLogger(__name__)
Tests = dict[str, list[tuple[Job, PairedResult]]]  # group name: each seed pair's test


def tested_checkpoint(job: Job) -> Path:
    """The checkpoint a finished job tested (its metrics.json's tested_checkpoint; in the job's
    checkpoints/ folder when the sweep folder was moved)."""
    named = job.metrics.get("tested_checkpoint")
    if not named:
        raise DataError(f"job {job.number} ({job.folder}): its metrics.json names no tested_checkpoint, the "
                          "model the length test translates with")
    path = job.located(named, "checkpoints")
    if not path.is_file():
        raise DataError(f"job {job.number}: its tested checkpoint {named} is missing; the length test "
                          "translates with it")
    return path


def write_segments(path: Path, items: list[Segment], edges: list[int]) -> None:
    """segments.tsv, one segment a line: joins, first line, source words, bucket, source, reference."""
    names = bucket_names(edges)
    lines = ["joins\tfirst_line\twords\tbucket\tsource\treference"] + [
        f"{s.joins}\t{s.first_line}\t{s.words}\t{names[bucket_of(s.words, edges)]}\t{s.source}\t{s.reference}"
        for s in items]
    with atomic_file(path) as tmp:
        tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")


def translate_job(cfg: DictConfig, job: Job, items: list[Segment], folder: Path) -> list[str]:
    """The job's translations of the segments (greedy unless `decoding` says otherwise), also
    written to lengths/JOB.translations.txt."""
    translator = load_translator([tested_checkpoint(job)], instantiate(cfg.decoding), cfg.quantize,
                                 kernels=cfg.kernels)
    translator.to(task_device(cfg.trainer))
    with ProgressBar(f"job {job.number}: translating", len(items), "segments", cfg.get("progress")) as bar:
        nbests = translate_lines(translator, [s.source for s in items], cfg.task.max_tokens, first_line=2, bar=bar,
                                 name=str(folder / "segments.tsv"))  # line 1: the header
    texts = [nbest[0].text for nbest in nbests]
    with atomic_file(folder / f"{job.number}.translations.txt") as tmp:
        tmp.write_text("".join(text + "\n" for text in texts), encoding="utf-8")
    return texts


def group_bleu(texts: list[str], items: list[Segment], named: dict[str, list[int]]) -> dict[str, float]:
    """Corpus BLEU of each group of segments (sacreBLEU: 13a, mixed case, no smoothing, as test/bleu)."""
    bleu = BLEU(tokenize="13a", smooth_method="none")
    return {name: bleu.corpus_score([texts[i] for i in index], [[items[i].reference for i in index]]).score
            for name, index in named.items()}


def compare_groups(row: Row, base_row: Row, texts: dict[int, list[str]], items: list[Segment],
                   named: dict[str, list[int]], samples: tuple[int, int], bar: ProgressBar) -> Tests:
    """Each group of each finished job of `row` against the base row's job of the same seed (`bar`
    advances by a group's test)."""
    base_jobs = {job.seed: job for job in base_row.finished()}
    tests: Tests = {name: [] for name in named}
    for job in row.finished():
        other = base_jobs.get(job.seed)
        if other is None:
            continue
        for name, index in named.items():
            refs = [items[i].reference for i in index]
            base, system = ([texts[j.number][i] for i in index] for j in (other, job))
            tests[name].append((job, paired_test(base, system, refs, *samples)))
            bar.advance(1)
    return tests


def tested_rows(rows: list[Row], texts: dict[int, list[str]], items: list[Segment], named: dict[str, list[int]],
              samples: tuple[int, int], progress: bool | None) -> dict[int, Tests]:
    """Every row but the base against the base row, group by group (none without a base row)."""
    base_row = next((row for row in rows if row.is_base), None)
    if base_row is None:
        return {}
    seeds = {job.seed for job in base_row.finished()}
    count = sum(job.seed in seeds for row in rows if not row.is_base for job in row.finished()) * len(named)
    with ProgressBar("significance tests", count, "tests", progress) as bar:
        return {index: compare_groups(row, base_row, texts, items, named, samples, bar)
                for index, row in enumerate(rows) if not row.is_base}


def length_rows(rows: list[Row], scores: dict[int, dict[str, float]], tests: dict[int, Tests],
              named: dict[str, list[int]]) -> list[dict[str, str]]:
    """One line per row: settings, seeds, each group's BLEU as mean ± std over the seeds, and for a
    row tested against the base the mean difference, marked * where it differs by the rule."""
    table = []
    for index, row in enumerate(rows):
        line = {"row": f"{index}{' (base)' if row.is_base else ''}", **row.settings,
                "seeds": f"{len(row.finished())}/{len(row.jobs)}"}
        for name, members in named.items():
            cell = spread([scores[job.number][name] for job in row.finished()])
            pairs = tests.get(index, {}).get(name)
            if pairs:
                mark = " *" if "*" in verdict(row, pairs)[0] else ""
                cell += f" ({statistics.mean(result.delta for _, result in pairs):+.2f}{mark})"
            line[f"{name} (n={len(members)})"] = cell
        table.append(line)
    return table


def length_tests(rows: list[Row], tests: dict[int, Tests]) -> list[dict[str, str]]:
    """One line per row, group and seed pair: both BLEU scores, the difference, its 95% CI, p-values."""
    return [{"row": str(index), **rows[index].settings, "group": name, "seed": job.seed or "", "job": str(job.number),
             "base BLEU": f"{r.baseline:.2f}", "BLEU": f"{r.system:.2f}", "Δ": f"{r.delta:+.2f}",
             "95% CI of Δ": f"[{r.ci_low:+.2f}, {r.ci_high:+.2f}]",
             "p bootstrap": "-" if r.identical else f"{r.p_bootstrap:.4f}",
             "p AR": "-" if r.identical else f"{r.p_randomization:.4f}"}
            for index, by_group in tests.items() for name, pairs in by_group.items() for job, r in pairs]


def length_jobs(jobs: list[Job], varied: list[str], scores: dict[int, dict[str, float]],
              named: dict[str, list[int]]) -> list[dict[str, str]]:
    """One line per job: its settings, seed, status and each group's BLEU."""
    return [{"job": str(job.number), **{k: job.settings.get(k, "") for k in varied}, "seed": job.seed or "",
             "status": job.status,
             **{name: f"{scores[job.number][name]:.2f}" if job.number in scores else "" for name in named}}
            for job in jobs]


def length_sentence(index: int, row: Row, tests: Tests | None) -> str:
    """What the tests say of a row: the groups where it is better or worse than the base, the rest."""
    name = ", ".join(f"{k}={v}" for k, v in row.settings.items()) or "the only setting"
    if row.is_base or tests is None or not any(tests.values()):  # the base, no base row, no seed pair
        return f"- row {index} ({name}): {verdict(row, None if tests is None else [])[1]}."
    sides: dict[str, list[str]] = {"better": [], "worse": [], "not shown to differ": []}
    for group, pairs in tests.items():
        mark = verdict(row, pairs)[0] if pairs else ""
        sides[mark.removesuffix(" *") if "*" in mark else "not shown to differ"].append(group)
    said = [f"{side} than the base in {', '.join(groups)}" if side != "not shown to differ" else
            f"{side} in {', '.join(groups)}" for side, groups in sides.items() if groups]
    return f"- row {index} ({name}): {'; '.join(said)}."


def length_summary(source: str, items: list[Segment], named: dict[str, list[int]], cfg: DictConfig) -> list[str]:
    """lengths.md's first paragraph: the segments, their lengths, the decoding and the rule."""
    joinings = [name for name in named if name.startswith("x")]
    counts = " + ".join(f"{len(named[name])} ({name})" for name in joinings)
    longest = {name: max(items[i].words for i in named[name]) for name in joinings}
    decoding = str(cfg.decoding.get("_target_", "")).rsplit(".", 1)[-1]
    longest_words = ", ".join(f"{name} {words}" for name, words in longest.items())
    return [f"{source} and its references, sentences joined {', '.join(n[1:] for n in joinings)} at a time: "
            f"{counts} = {len(items)} segments, the longest source of {longest_words} words. "
            f"Decoded with {decoding} (`decoding`), scored with corpus BLEU (sacreBLEU, 13a, mixed case). "
            "A cell is the mean ± standard deviation over the seeds, and for a row tested against the base the mean "
            "difference; * where it differs from the base by task=report's rule (both paired tests p < 0.05 for "
            "every seed pair, one sign)."]


def write_lengths_md(path: Path, title: str, intro: list[str], rows: list[Row], tables: dict[str, list[dict[str, str]]],
                   tests: dict[int, Tests]) -> None:
    lines = [f"# {title}", "", *intro, "", *table_lines(tables["rows"]), ""]
    lines += [length_sentence(index, row, tests.get(index) if tests or row.is_base else None)
              for index, row in enumerate(rows)]
    if tables["tests"]:
        lines += ["", "## The tests, seed against seed", "", *table_lines(tables["tests"])]
    lines += ["", "## Jobs", "", *table_lines(tables["jobs"])]
    with atomic_file(path) as tmp:
        tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")


def write_lengths_plot(path: Path, title: str, rows: list[Row], scores: dict[int, dict[str, float]], buckets: list[str],
               named: dict[str, list[int]]) -> dict[str, list[float]]:
    """BLEU by length bucket, a line per row (mean ± std over its seeds, each seed a dot); returns
    each row's means."""
    import matplotlib.pyplot as plt

    shown = [name for name in buckets if name in named]
    fig, ax = plt.subplots(figsize=(max(5.5, 1.1 * len(shown)), 4.0))
    drawn = {}
    for index, row in enumerate(rows):
        values = [[scores[job.number][name] for job in row.finished()] for name in shown]
        if not row.finished():
            continue
        label = ", ".join(str(v) for v in row.settings.values()) or "all"
        means = [statistics.mean(v) for v in values]
        stds = [statistics.stdev(v) if len(v) > 1 else 0.0 for v in values]
        offset = (index - (len(rows) - 1) / 2) * 0.06
        xs = [x + offset for x in range(len(shown))]
        ax.errorbar(xs, means, yerr=stds, fmt="o-", capsize=3, color=f"C{index}",
                    label=f"{label} (base)" if row.is_base else label, linewidth=2.2 if row.is_base else 1.3)
        for x, seeds in zip(xs, values):
            ax.scatter([x] * len(seeds), seeds, s=10, alpha=0.4, color=f"C{index}")
        drawn[label] = means
    ax.set_xticks(range(len(shown)), [f"{name}\n(n={len(named[name])})" for name in shown], fontsize=8)
    ax.set_xlabel("source length (words)")
    ax.set_ylabel("BLEU (higher is better)")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    plots.save(fig, path, dpi=120)
    return drawn


def run(cfg: DictConfig) -> dict:
    options = cfg.task
    joins, edges = list(options.joins), list(options.buckets)
    pairs = aligned_files(str(options.source), str(options.reference))
    sweep = read_sweep(Path(options.sweep_dir))
    rows = group_rows(sweep, options.get("base_row"))
    items = segments(pairs.src, pairs.tgt, joins)
    named = groups(items, edges)
    folder = sweep.folder / "lengths"
    folder.mkdir(exist_ok=True)
    write_segments(folder / "segments.tsv", items, edges)
    texts = {job.number: translate_job(cfg, job, items, folder) for job in sweep.jobs if job.done}
    scores = {number: group_bleu(hyps, items, named) for number, hyps in texts.items()}
    tests = tested_rows(rows, texts, items, named, (options.bootstrap_samples, options.randomization_trials),
                        cfg.get("progress"))
    tables = {"rows": length_rows(rows, scores, tests, named), "tests": length_tests(rows, tests),
              "jobs": length_jobs(sweep.jobs, sweep.varied, scores, named)}
    title = f"{sweep.folder.name}: BLEU by length ({', '.join(sweep.varied) or 'one setting'})"
    intro = length_summary(pairs.src_name, items, named, cfg)
    write_lengths_md(sweep.folder / "lengths.md", title, intro, rows, tables, tests)
    write_csv(sweep.folder / "lengths.csv", tables["rows"])
    write_csv(sweep.folder / "lengths_significance.csv", tables["tests"])
    drawn = write_lengths_plot(sweep.folder / "lengths.png", title, rows, scores, bucket_names(edges), named)
    print((sweep.folder / "lengths.md").read_text(encoding="utf-8"))
    log.info("BLEU by length of %d jobs in %d rows written to %s/lengths.{md,csv,png}, their translations to "
             "lengths/", len(texts), len(rows), sweep.folder)
    return {"jobs": len(texts), "segments": len(items), "groups": {name: len(i) for name, i in named.items()},
            "scores": scores, "plot": drawn}
