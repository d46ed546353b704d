"""task=report: the jobs of a multirun as a table like the paper's Table 3, with seeds and
significance, and plots.

    python run.py task=report task.sweep_dir=outputs/ablation/heads_<date> [task.metric=bleu|chrf|ter|bleu_tok_lc]

Reads every job directory of the sweep (`0/`, `1/`, ...: its `.hydra/overrides.yaml` and
`metrics.json`). A *row* is one setting of the varied keys other than `seed`; its jobs are its
seeds. The base row is the one whose settings equal the sweep's own config (`multirun.yaml`), or
the row numbered `task.base_row=N` (the table's row column) when the config does not name it (a key
left null there, such as `model.d_k`). Without a base row the report has no tests and says why.
Writes into the sweep directory:
- `report.md`: per row the seeds that finished, the mean and standard deviation over seeds of the
  val BLEU, test BLEU, chrF and TER, val perplexity and training time (a finished job without a
  value, such as a run from before TER: a dash), and the difference in test `task.metric` (bleu,
  chrf, ter or bleu_tok_lc, BLEU on 13a-tokenized lowercased text; TER: lower is better) to the base
  row with sacreBLEU's paired tests (bootstrap and approximate randomization, seed against the same
  seed: evaluation/significance.py), a sentence per row saying whether it differs from the base,
  the tests per seed, and every job with its status;
- `report.csv` (the rows), `jobs.csv` (the jobs), `significance.csv` (the tests per seed);
- `report.png` (val and test scores of `task.metric` per row, mean +- std with each seed as a dot, the
  base marked, the axis saying whether higher or lower is better)
  and `curves.png` (train loss, val loss and val BLEU against the step, one line per job).

A job without metrics is listed as failed (with the reason from its `error.txt`) or as running /
killed, never dropped. A row *differs from the base* when, for every seed both have, both paired
tests give p < 0.05 and the differences all have the same sign. A seed pair whose outputs are
identical to the metric (PairedResult.identical) is never significant, and its p-values are shown
as "-", with a note saying why (sacreBLEU returns its smallest p there); the tests need each finished
job's test translations and references (`metrics.json`: `translations`, `references`), and a job
whose files are missing or whose references are not the base's stops the report in one line.
"""

import logging
import statistics
import textwrap
from dataclasses import dataclass
from pathlib import Path

from omegaconf import DictConfig

from transformer_mt import plots
from transformer_mt.atomic import atomic_file
from transformer_mt.errors import ConfigError, DataError
from transformer_mt.evaluation.significance import (
    BOOTSTRAP_SAMPLES,
    LEVEL,
    LOWER_IS_BETTER,
    METRICS,
    RANDOMIZATION_TRIALS,
    PairedResult,
    paired_test,
)
from transformer_mt.tasks.runs.comparison import group_rows, spread, table_lines, verdict, write_csv
from transformer_mt.tasks.runs.sweep import SEED, Job, Row, Sweep, read_sweep
from transformer_mt.training.curves import read_curves
from transformer_mt.validate import check, listing, one_of

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MetricColumn:
    """A figure of the jobs' metrics.json as a column of the report: a job shows its value; a row
    the mean ± std over its seeds (`per_seed`), else its first finished seed's value (the same for
    every seed, as the parameter count)."""

    header: str
    key: str  # in metrics.json
    unit: float = 1.0  # shown as value / unit (seconds as minutes: 60)
    decimals: int | None = 2  # a job's value to these decimals; None: as metrics.json has it
    per_seed: bool = True
    job_column: int = 0  # its place in the jobs table (the rows table keeps METRIC_COLUMNS' order)

    def shown(self, value: float) -> str:
        """One job's value as its cell."""
        return str(value) if self.decimals is None else f"{value / self.unit:.{self.decimals}f}"


METRIC_COLUMNS = (  # the one list of the report's metrics: the rows table's columns in this order
    MetricColumn("params (M)", "num_parameters", unit=1e6, per_seed=False, job_column=0),
    MetricColumn("steps", "steps", decimals=None, per_seed=False, job_column=2),
    MetricColumn("val BLEU", "val/bleu_best", job_column=4),
    MetricColumn("test BLEU", "test/bleu", job_column=5),
    MetricColumn("test chrF", "test/chrf", job_column=6),
    MetricColumn("test TER", "test/ter", job_column=7),
    MetricColumn("val PPL", "val/ppl", job_column=3),
    MetricColumn("train (min)", "train_seconds", unit=60, decimals=1, job_column=1),
)
JOB_COLUMNS = sorted(METRIC_COLUMNS, key=lambda column: column.job_column)


def set_columns(sweep: Sweep) -> tuple[MetricColumn, ...]:
    """A test BLEU column for each named test set (data.corpora) of the jobs' metrics.json, after
    the report's own columns (the significance tests compare the first set, test/bleu)."""
    names = dict.fromkeys(key.split("/")[1] for job in sweep.jobs for key in job.metrics
                          if key.startswith("test/") and key.endswith("/bleu") and key.count("/") == 2)
    return tuple(MetricColumn(f"test BLEU ({name})", f"test/{name}/bleu", job_column=len(METRIC_COLUMNS) + i)
                 for i, name in enumerate(names))

def identical_note(n_bootstrap: int, n_randomization: int) -> str:
    """report.md's note on pairs whose outputs the metric cannot tell apart."""
    return ("p-values are shown as - where the two systems' outputs are identical (or differ only where the "
            "metric does not look, every sentence scoring alike): sacreBLEU's tests then return their "
            f"smallest p (1/{n_bootstrap + 1}, 1/{n_randomization + 1}), which says nothing "
            "about a difference; such a pair never counts as differing.")


def check_metric(metric: object) -> str:
    """The metric the tests compare (`task.metric`): bleu, chrf, ter or bleu_tok_lc."""
    check("task.metric", metric, one_of(*METRICS), listing(METRICS))
    return str(metric)


def no_base(sweep: Sweep) -> str:
    """Why there are no tests: no row has the sweep's own settings."""
    own = ", ".join(f"{k}={sweep.own.get(k)}" for k in sweep.varied) or "none"
    return (f"no row has the sweep's own settings ({own}), so there is no base row and nothing is tested; "
            "name it with task.base_row=N (the row column)")


def row_cell(row: Row, column: MetricColumn) -> str:
    """A row's cell: the spread over its finished jobs (a dash when none of them has the metric, a
    run from before it existed; the count when only some have it; empty when no job finished), or
    the first finished job's value."""
    finished = row.finished()
    if not column.per_seed:
        first = finished[0].metrics if finished else {}
        return column.shown(first[column.key]) if column.key in first else ""
    values = [value / column.unit for value in row.values(column.key)]
    if finished and not values:
        return "-"
    counted = f" ({len(values)} of {len(finished)} seeds)" if len(values) < len(finished) else ""
    return spread(values) + counted


def compare(row: Row, base_row: Row, metric: str = "bleu", n_bootstrap: int = BOOTSTRAP_SAMPLES,
            n_randomization: int = RANDOMIZATION_TRIALS) -> list[tuple[Job, PairedResult]]:
    """Each finished job of `row` against the base row's job of the same seed (sacreBLEU's tests on
    `metric`, with `n_bootstrap` resamples and `n_randomization` trials)."""
    base_jobs = {job.seed: job for job in base_row.finished()}
    results = []
    for job in row.finished():
        other = base_jobs.get(job.seed)
        if other is None:
            continue
        base_hyps, base_refs = other.test_outputs()
        hyps, refs = job.test_outputs()
        if refs != base_refs:
            raise DataError(f"job {job.number} was scored on other references than the base row's job "
                              f"{other.number} (seed {job.seed}): different test sets cannot be compared")
        results.append((job, paired_test(base_hyps, hyps, refs, n_bootstrap, n_randomization, metric)))
    return results


def row_table(rows: list[Row], tests: dict[int, list], metric: str = "bleu",
              extra: tuple[MetricColumn, ...] = ()) -> list[dict[str, str]]:
    """One line per row: settings, seeds, each metric column (`extra`: the named sets' after them),
    the test against the base (on `metric`)."""
    table = []
    for index, row in enumerate(rows):
        line = {"row": f"{index}{' (base)' if row.is_base else ''}", **row.settings,
                "seeds": f"{len(row.finished())}/{len(row.jobs)}"}
        line.update({column.header: row_cell(row, column) for column in (*METRIC_COLUMNS, *extra)})
        results = [result for _, result in tests.get(index, [])]
        line[f"Δ test {METRICS[metric][0]}"] = f"{statistics.mean(r.delta for r in results):+.2f}" if results else ""
        line["max p (bootstrap / AR)"] = "" if not results else "- / -" if any(r.identical for r in results) else (
            f"{max(r.p_bootstrap for r in results):.4f} / {max(r.p_randomization for r in results):.4f}")
        line["differs"] = verdict(row, tests.get(index))[0]
        table.append(line)
    return table


def test_table(rows: list[Row], tests: dict[int, list]) -> list[dict[str, str]]:
    """One line per seed pair tested: the row, the seed, both scores, the difference, its 95% CI, p-values."""
    table = []
    for index, pairs in tests.items():
        for job, r in pairs:
            label = METRICS[r.metric][0]
            table.append({"row": str(index), **rows[index].settings, "seed": job.seed or "",
                          "job": str(job.number), f"base {label}": f"{r.baseline:.2f}", label: f"{r.system:.2f}",
                          "Δ": f"{r.delta:+.2f}", "95% CI of Δ": f"[{r.ci_low:+.2f}, {r.ci_high:+.2f}]",
                          "p bootstrap": "-" if r.identical else f"{r.p_bootstrap:.4f}",
                          "p AR": "-" if r.identical else f"{r.p_randomization:.4f}"})
    return table


def job_table(sweep: Sweep, rows: list[Row], extra: tuple[MetricColumn, ...] = ()) -> list[dict[str, str]]:
    """One line per job: job, varied settings, seed, status, metric columns (`extra`: the named sets'
    after them); the base row's jobs marked."""
    base_jobs = {job.number for row in rows if row.is_base for job in row.jobs}
    out = []
    for job in sweep.jobs:
        line = {"job": f"{job.number}{' (base)' if job.number in base_jobs else ''}"}
        line.update({k: job.settings.get(k, "") for k in sweep.varied})
        line["seed"] = job.seed or ""
        line["status"] = job.status
        for column in (*JOB_COLUMNS, *extra):
            value = job.metrics.get(column.key)
            line[column.header] = column.shown(value) if isinstance(value, int | float) else "-" if job.done else ""
        out.append(line)
    return out


def write_markdown(path: Path, title: str, rows: list[Row], tables: dict[str, list[dict[str, str]]],
                   tests: dict[int, list], missing_base: str | None, metric: str = "bleu",
                   samples: tuple[int, int] = (BOOTSTRAP_SAMPLES, RANDOMIZATION_TRIALS)) -> None:
    lines = [f"# {title}", "", *table_lines(tables["rows"]), ""]
    if missing_base:
        lines += [f"**No base row**: {missing_base}.", ""]
    lower = ", lower is better," if metric in LOWER_IS_BETTER else ""
    lines += ["Mean ± standard deviation over the seeds that finished (seeds: finished / jobs; -: not in the "
              f"jobs' metrics.json). The tests compare test {METRICS[metric][0]}{lower} (task.metric={metric}). "
              f"A row differs from the base (*) when, for every seed both finished, sacreBLEU's paired bootstrap "
              f"({samples[0]:,} resamples) and paired approximate randomization ({samples[1]:,} trials) tests of "
              f"its test translations against the base row's "
              f"(same seed) both give p < {LEVEL}, and the differences have the same sign.", ""]
    if any(result.identical for pairs in tests.values() for _, result in pairs):
        lines += [identical_note(*samples), ""]
    for index, row in enumerate(rows):
        name = ", ".join(f"{k}={v}" for k, v in row.settings.items()) or "the only setting"
        lines.append(f"- row {index} ({name}): {verdict(row, tests.get(index))[1]}.")
    if tables["tests"]:
        lines += ["", "## The tests, seed against seed", "", *table_lines(tables["tests"])]
    lines += ["", "## Jobs", "", *table_lines(tables["jobs"])]
    with atomic_file(path) as tmp:
        tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")


def plotted(metric: str) -> tuple[list[tuple[str, str]], str]:
    """The series report.png draws for `metric` (metrics.json key, legend name) and its axis label,
    which says in which direction the metric is better."""
    label = METRICS[metric][0]
    series = {"bleu": [("val/bleu_best", "val BLEU (best)")],
              "chrf": [("val/chrf", "val chrF (last validation)")],
              "ter": [("val/ter", "val TER (last validation)")]}.get(metric, [])  # bleu_tok_lc: test only
    better = "lower" if metric in LOWER_IS_BETTER else "higher"
    return [*series, (f"test/{metric}", f"test {label}")], f"{label} ({better} is better)"


def write_plot(path: Path, title: str, rows: list[Row], varied: list[str], metric: str = "bleu") -> dict:
    """The val and test scores of `metric` per row: each seed a dot, mean +- std as an error bar;
    the base row shaded. Returns what it drew: the y label and each series' values per row."""
    import matplotlib.pyplot as plt

    series, ylabel = plotted(metric)
    drawn: dict[str, list[list[float]]] = {key: [row.values(key) for row in rows] for key, _ in series}
    width = max(5.0, 1.2 * len(rows))
    fig, ax = plt.subplots(figsize=(width, 3.8))
    offsets = (-0.12, 0.12) if len(series) == 2 else (0.0,)
    for offset, (key, name), marker in zip(offsets, series, "os"):
        means, stds, xs = [], [], []
        for x, values in enumerate(drawn[key]):
            if not values:
                continue
            ax.scatter([x + offset] * len(values), values, s=14, alpha=0.45, marker=marker, color=f"C{offset > 0:d}")
            xs.append(x + offset)
            means.append(statistics.mean(values))
            stds.append(statistics.stdev(values) if len(values) > 1 else 0.0)
        ax.errorbar(xs, means, yerr=stds, fmt=marker + "-", capsize=4, color=f"C{offset > 0:d}",
                    label=f"{name} (mean ± std)")
    for x, row in enumerate(rows):
        if row.is_base:
            ax.axvspan(x - 0.4, x + 0.4, color="0.9", zorder=0)
    labels = [", ".join(str(v) for v in row.settings.values()) or "all" for row in rows]
    labels = [f"{label}\n(base)" if row.is_base else label for label, row in zip(labels, rows)]
    ax.set_xticks(range(len(rows)), labels, fontsize=8)
    ax.set_xlabel(", ".join(varied) or "row")
    ax.set_ylabel(ylabel)
    ax.set_title("\n".join(textwrap.wrap(title, int(11 * width))), fontsize=10)  # about 11 characters an inch
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    plots.save(fig, path, dpi=120)
    return {"ylabel": ylabel, "series": drawn}


def write_curves(path: Path, title: str, sweep: Sweep) -> int:
    """The learning curves of every job that has them in one figure; returns how many jobs had them."""
    runs = {}
    for job in sweep.jobs:
        curves = job.folder / "plots" / "curves.csv"
        if curves.is_file():
            label = ", ".join(f"{k}={job.settings.get(k, '')}" for k in [*sweep.varied, SEED] if k in job.settings)
            runs[label or f"job {job.number}"] = read_curves(curves)
    if runs:
        plots.save(plots.curves_figure(runs, title), path)
    return len(runs)


def run(cfg: DictConfig) -> dict:
    options = cfg.task
    if not options.get("sweep_dir"):
        raise ConfigError("task=report needs task.sweep_dir=PATH (a multirun directory with job folders 0/, 1/, ...)")
    metric = check_metric(options.get("metric", "bleu"))
    samples = options.bootstrap_samples, options.randomization_trials
    sweep = read_sweep(Path(options.sweep_dir))
    rows = group_rows(sweep, options.get("base_row"))
    base_row = next((row for row in rows if row.is_base), None)
    tests = {index: compare(row, base_row, metric, *samples) for index, row in enumerate(rows)
             if base_row is not None and not row.is_base}
    missing_base = no_base(sweep) if base_row is None and len(rows) > 1 else None
    if missing_base:
        log.warning("%s", missing_base)
    named = set_columns(sweep)
    tables = {"rows": row_table(rows, tests, metric, named), "tests": test_table(rows, tests),
              "jobs": job_table(sweep, rows, named)}
    folder = sweep.folder
    title = f"{folder.name}: {', '.join(sweep.varied) or 'one setting'}"
    write_markdown(folder / "report.md", title, rows, tables, tests, missing_base, metric, samples)
    write_csv(folder / "report.csv", tables["rows"])
    write_csv(folder / "jobs.csv", tables["jobs"])
    write_csv(folder / "significance.csv", tables["tests"])
    drawn = write_plot(folder / "report.png", title, rows, sweep.varied, metric)
    curves = write_curves(folder / "curves.png", title, sweep)
    print((folder / "report.md").read_text(encoding="utf-8"))
    log.info("report of %d jobs in %d rows written to %s/report.{md,csv,png}, learning curves of %d jobs to "
             "curves.png", len(sweep.jobs), len(rows), folder, curves)
    return {"jobs": len(sweep.jobs), "done": sum(job.done for job in sweep.jobs), "rows": len(rows),
            "metric": metric, "differs": {index: verdict(rows[index], pairs)[0] for index, pairs in tests.items()},
            "curves": curves, "report": str(folder), "plot": drawn}
