"""task=report: the jobs of a multirun as a table like the paper's Table 3, with seeds and
significance, and plots.

    python run.py task=report sweep_dir=outputs/ablation/heads_<date> [metric=bleu|chrf|ter|bleu_tok_lc]

Reads every job directory of the sweep (`0/`, `1/`, ...: its `.hydra/overrides.yaml` and
`metrics.json`). A *row* is one setting of the varied keys other than `seed`; its jobs are its
seeds. The base row is the one whose settings equal the sweep's own config (`multirun.yaml`), or
the row numbered `base_row=N` (the table's row column) when the config does not name it (a key left
null there, such as `model.d_k`). Without a base row the report has no tests and says why.
Writes into the sweep directory:
- `report.md`: per row the seeds that finished, the mean and standard deviation over seeds of the
  val BLEU, test BLEU, chrF and TER, val perplexity and training time (a finished job without a
  value, such as a run from before TER: a dash), and the difference in test `metric` (bleu, chrf,
  ter or bleu_tok_lc, BLEU on 13a-tokenized lowercased text; TER: lower is better) to the base row
  with sacreBLEU's paired tests (bootstrap and approximate randomization, seed against the same
  seed: evaluation/significance.py), a sentence per row saying whether it differs from the base,
  the tests per seed, and every job with its status;
- `report.csv` (the rows), `jobs.csv` (the jobs), `significance.csv` (the tests per seed);
- `report.png` (val and test BLEU per row, mean +- std with each seed as a dot, the base marked)
  and `curves.png` (train loss, val loss and val BLEU against the step, one line per job).

A job without metrics is listed as failed (with the reason from its `error.txt`) or as running /
killed, never dropped. A row *differs from the base* when, for every seed both have, both paired
tests give p < 0.05 and the differences all have the same sign. A seed pair whose outputs are
identical to the metric (PairedResult.identical) is never significant, and its p-values are shown
as "-", with a note saying why (sacreBLEU returns its smallest p there); the tests need each finished
job's test translations and references (`metrics.json`: `translations`, `references`), and a job
whose files are missing or whose references are not the base's stops the report in one line.
"""

import csv
import json
import logging
import statistics
import textwrap
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from transformer_mt import plots
from transformer_mt.atomic import atomic_file
from transformer_mt.errors import ConfigError
from transformer_mt.evaluation.significance import (
    BOOTSTRAP_SAMPLES,
    LEVEL,
    LOWER_IS_BETTER,
    METRICS,
    RANDOMIZATION_TRIALS,
    PairedResult,
    paired_test,
)
from transformer_mt.markdown import markdown_table
from transformer_mt.multirun import FAILURE_FILE
from transformer_mt.training.curves import read_curves

log = logging.getLogger(__name__)

SEED = "seed"
RESUME = "ckpt_path"  # not a setting: a job resumed into its own folder is the job it continues
COLUMNS = [  # header, metrics.json key, format
    ("params (M)", "num_parameters", lambda v: f"{v / 1e6:.2f}"),
    ("train (min)", "train_seconds", lambda v: f"{v / 60:.1f}"),
    ("steps", "steps", str),
    ("val PPL", "val/ppl", lambda v: f"{v:.2f}"),
    ("val BLEU", "val/bleu_best", lambda v: f"{v:.2f}"),
    ("test BLEU", "test/bleu", lambda v: f"{v:.2f}"),
    ("test chrF", "test/chrf", lambda v: f"{v:.2f}"),
    ("test TER", "test/ter", lambda v: f"{v:.2f}"),
]
SPREAD = [  # header, metrics.json key, scale: mean +- std over a row's seeds
    ("val BLEU", "val/bleu_best", 1.0),
    ("test BLEU", "test/bleu", 1.0),
    ("test chrF", "test/chrf", 1.0),
    ("test TER", "test/ter", 1.0),
    ("val PPL", "val/ppl", 1.0),
    ("train (min)", "train_seconds", 1 / 60),
]

IDENTICAL_NOTE = ("p-values are shown as - where the two systems' outputs are identical (or differ only where the "
                  "metric does not look, every sentence scoring alike): sacreBLEU's tests then return their "
                  f"smallest p (1/{BOOTSTRAP_SAMPLES + 1}, 1/{RANDOMIZATION_TRIALS + 1}), which says nothing "
                  "about a difference; such a pair never counts as differing.")


def check_metric(metric: object) -> str:
    """The metric the tests compare (the `metric` key): bleu, chrf, ter or bleu_tok_lc."""
    if not isinstance(metric, str) or metric not in METRICS:
        raise ConfigError(f"metric={metric}: must be one of {', '.join(METRICS)}")
    return str(metric)


def read_job(folder: Path) -> dict:
    """One job: its overrides as {key: value}, status, and metrics (empty unless done)."""
    overrides_file = folder / ".hydra" / "overrides.yaml"
    overrides = OmegaConf.load(overrides_file) if overrides_file.is_file() else []
    settings = dict(o.split("=", 1) for o in overrides if "=" in o and not o.startswith(("~", f"{RESUME}=")))
    metrics_file, failure_file = folder / "metrics.json", folder / FAILURE_FILE
    job = {"job": int(folder.name), "folder": folder, "settings": settings, "seed": settings.get(SEED)}
    if metrics_file.is_file():
        return {**job, "status": "done", "metrics": json.loads(metrics_file.read_text(encoding="utf-8"))}
    status = f"failed: {failure_file.read_text(encoding='utf-8').strip()}" if failure_file.is_file() \
        else "running or killed"
    return {**job, "status": status, "metrics": {}}


def read_sweep(sweep_dir: Path) -> tuple[list[dict], list[str], dict]:
    """The jobs (by number), the keys other than `seed` whose values differ between them, and the
    base row's values of those keys (from the sweep's own config)."""
    if not sweep_dir.is_dir():
        raise ConfigError(f"sweep_dir={sweep_dir}: no such directory")
    jobs = [read_job(f) for f in sorted((p for p in sweep_dir.iterdir() if p.is_dir() and p.name.isdigit()),
                                        key=lambda p: int(p.name))]
    if not jobs:
        raise ConfigError(f"sweep_dir={sweep_dir}: no job directories (0/, 1/, ...) in it")
    keys = list(dict.fromkeys(k for job in jobs for k in job["settings"] if k != SEED))
    varied = [k for k in keys if len({job["settings"].get(k) for job in jobs}) > 1]
    sweep_config = OmegaConf.load(sweep_dir / "multirun.yaml") if (sweep_dir / "multirun.yaml").is_file() else None
    base = {}
    if sweep_config is not None:
        for key in varied:
            value = OmegaConf.select(sweep_config, key, default=None, throw_on_resolution_failure=False)
            base[key] = None if value is None else str(value)
    return jobs, varied, base


def group_rows(jobs: list[dict], varied: list[str], base: dict, base_row: int | None = None) -> list[dict]:
    """The rows: one per setting of the varied keys, with its jobs (seeds) in job order; the base
    row (number `base_row`, else the one whose settings equal `base`) has is_base."""
    groups: dict[tuple, dict] = {}
    for job in jobs:
        key = tuple(job["settings"].get(k) for k in varied)
        groups.setdefault(key, {"settings": dict(zip(varied, key)), "jobs": []})["jobs"].append(job)
    rows = list(groups.values())
    if base_row is not None and not (isinstance(base_row, int) and 0 <= base_row < len(rows)):
        raise ConfigError(f"base_row={base_row}: must be a row number of this sweep, 0 to {len(rows) - 1}")
    for index, row in enumerate(rows):
        row["is_base"] = index == base_row if base_row is not None else (
            bool(base) and all(row["settings"][k] == base.get(k) for k in varied))
    return rows


def no_base(varied: list[str], base: dict) -> str:
    """Why there are no tests: no row has the sweep's own settings."""
    own = ", ".join(f"{k}={base.get(k)}" for k in varied) or "none"
    return (f"no row has the sweep's own settings ({own}), so there is no base row and nothing is tested; "
            "name it with base_row=N (the row column)")


def done(row: dict) -> list[dict]:
    return [job for job in row["jobs"] if job["status"] == "done"]


def spread(values: list[float]) -> str:
    """"mean +- std" over seeds (the sample standard deviation; one value: the value)."""
    if not values:
        return ""
    if len(values) == 1:
        return f"{values[0]:.2f}"
    return f"{statistics.mean(values):.2f} ± {statistics.stdev(values):.2f}"


def row_spread(finished: list[dict], key: str, scale: float) -> str:
    """The spread of `key` over a row's finished jobs: a dash when none of them has it (a run from
    before the metric existed), the count when only some have it, empty when no job finished."""
    values = [job["metrics"][key] * scale for job in finished if isinstance(job["metrics"].get(key), int | float)]
    if finished and not values:
        return "-"
    counted = f" ({len(values)} of {len(finished)} seeds)" if len(values) < len(finished) else ""
    return spread(values) + counted


def outputs(job: dict) -> tuple[list[str], list[str]]:
    """A finished job's test translations and references, each line a sentence."""
    texts = []
    for key, what in (("translations", "test translations"), ("references", "test references")):
        named = job["metrics"].get(key)
        if not named:
            raise ConfigError(f"{job['folder']}/metrics.json: no {key!r} ({what}), which the significance tests "
                              "need (a run from before references were kept: evaluate it again)")
        path = Path(named)
        if not path.is_file() and (job["folder"] / path.name).is_file():  # the sweep folder was moved
            path = job["folder"] / path.name
        if not path.is_file():
            raise ConfigError(f"job {job['job']}: its {what} {named} are missing; the significance tests need them")
        texts.append(path.read_text(encoding="utf-8").splitlines())
    return texts[0], texts[1]


def compare(row: dict, base_row: dict, metric: str = "bleu") -> list[tuple[dict, PairedResult]]:
    """Each finished job of `row` against the base row's job of the same seed (sacreBLEU's tests on
    `metric`)."""
    base_jobs = {job["seed"]: job for job in done(base_row)}
    results = []
    for job in done(row):
        other = base_jobs.get(job["seed"])
        if other is None:
            continue
        base_hyps, base_refs = outputs(other)
        hyps, refs = outputs(job)
        if refs != base_refs:
            raise ConfigError(f"job {job['job']} was scored on other references than the base row's job "
                              f"{other['job']} (seed {job['seed']}): different test sets cannot be compared")
        results.append((job, paired_test(base_hyps, hyps, refs, metric=metric)))
    return results


def verdict(row: dict, tests: list[tuple[dict, PairedResult]] | None) -> tuple[str, str]:
    """(mark, sentence): whether the row differs from the base, by the rule in the docstring
    (tests None: the sweep has no base row)."""
    if row["is_base"]:
        return "base", "the base row"
    if tests is None:
        return "", "not tested (no base row)"
    if not tests:
        return "", "no seed finished in both this row and the base row: not tested"
    metric = tests[0][1].metric
    label = f"test {METRICS[metric][0]}{' (lower is better)' if metric in LOWER_IS_BETTER else ''}"
    deltas = [result.delta for _, result in tests]
    mean = statistics.mean(deltas)
    every = "the seed pair" if len(tests) == 1 else f"all {len(tests)} seed pairs"
    if all(result.identical for _, result in tests):
        return "-", (f"identical to the base: {mean:+.2f} test {METRICS[metric][0]}, every sentence scored alike "
                     f"for {every}; nothing to test")
    if all(result.significant for _, result in tests) and (min(deltas) > 0 or max(deltas) < 0):
        side = "better" if tests[0][1].gain > 0 else "worse"
        return f"{side} *", (f"{side} than the base: {mean:+.2f} {label}, p < {LEVEL} in both tests for {every}")
    return "-", (f"not shown to differ from the base: {mean:+.2f} {label}; the rule (p < {LEVEL} in both tests, "
                 f"the same sign, for {every}) does not hold")


def row_table(rows: list[dict], tests: dict[int, list], metric: str = "bleu") -> list[dict[str, str]]:
    """One line per row: settings, seeds, the spread of each metric over seeds, the test against the
    base (on `metric`)."""
    table = []
    for index, row in enumerate(rows):
        finished = done(row)
        line = {"row": f"{index}{' (base)' if row['is_base'] else ''}", **row["settings"],
                "seeds": f"{len(finished)}/{len(row['jobs'])}"}
        first = finished[0]["metrics"] if finished else {}
        line["params (M)"] = f"{first['num_parameters'] / 1e6:.2f}" if "num_parameters" in first else ""
        line["steps"] = str(first.get("steps", ""))
        for header, key, scale in SPREAD:
            line[header] = row_spread(finished, key, scale)
        results = [result for _, result in tests.get(index, [])]
        line[f"Δ test {METRICS[metric][0]}"] = f"{statistics.mean(r.delta for r in results):+.2f}" if results else ""
        line["max p (bootstrap / AR)"] = "" if not results else "- / -" if any(r.identical for r in results) else (
            f"{max(r.p_bootstrap for r in results):.4f} / {max(r.p_randomization for r in results):.4f}")
        line["differs"] = verdict(row, tests.get(index))[0]
        table.append(line)
    return table


def test_table(rows: list[dict], tests: dict[int, list]) -> list[dict[str, str]]:
    """One line per seed pair tested: the row, the seed, both scores, the difference, its 95% CI, p-values."""
    table = []
    for index, pairs in tests.items():
        for job, r in pairs:
            label = METRICS[r.metric][0]
            table.append({"row": str(index), **rows[index]["settings"], "seed": str(job["seed"]),
                          "job": str(job["job"]), f"base {label}": f"{r.baseline:.2f}", label: f"{r.system:.2f}",
                          "Δ": f"{r.delta:+.2f}", "95% CI of Δ": f"[{r.ci_low:+.2f}, {r.ci_high:+.2f}]",
                          "p bootstrap": "-" if r.identical else f"{r.p_bootstrap:.4f}",
                          "p AR": "-" if r.identical else f"{r.p_randomization:.4f}"})
    return table


def job_table(jobs: list[dict], varied: list[str], rows: list[dict]) -> list[dict[str, str]]:
    """Table rows as strings: job, varied settings, seed, status, metric columns; the base row's jobs marked."""
    base_jobs = {job["job"] for row in rows if row["is_base"] for job in row["jobs"]}
    out = []
    for job in jobs:
        line = {"job": f"{job['job']}{' (base)' if job['job'] in base_jobs else ''}"}
        line.update({k: job["settings"].get(k, "") for k in varied})
        line["seed"] = job["seed"] or ""
        line["status"] = job["status"]
        for header, key, fmt in COLUMNS:
            value = job["metrics"].get(key)
            line[header] = fmt(value) if isinstance(value, int | float) else "-" if job["status"] == "done" else ""
        out.append(line)
    return out


def table_lines(table: list[dict[str, str]]) -> list[str]:
    """A table of the report (a dict per line) as the lines of a Markdown table."""
    header = list(table[0])
    return markdown_table(header, [[line[h] for h in header] for line in table]).split("\n")


def write_markdown(path: Path, title: str, rows: list[dict], tables: dict[str, list[dict[str, str]]],
                   tests: dict[int, list], missing_base: str | None, metric: str = "bleu") -> None:
    lines = [f"# {title}", "", *table_lines(tables["rows"]), ""]
    if missing_base:
        lines += [f"**No base row**: {missing_base}.", ""]
    lower = ", lower is better," if metric in LOWER_IS_BETTER else ""
    lines += ["Mean ± standard deviation over the seeds that finished (seeds: finished / jobs; -: not in the "
              f"jobs' metrics.json). The tests compare test {METRICS[metric][0]}{lower} (metric={metric}). "
              f"A row differs from the base (*) when, for every seed both finished, sacreBLEU's paired bootstrap "
              f"and paired approximate randomization tests of its test translations against the base row's "
              f"(same seed) both give p < {LEVEL}, and the differences have the same sign.", ""]
    if any(result.identical for pairs in tests.values() for _, result in pairs):
        lines += [IDENTICAL_NOTE, ""]
    for index, row in enumerate(rows):
        name = ", ".join(f"{k}={v}" for k, v in row["settings"].items()) or "the only setting"
        lines.append(f"- row {index} ({name}): {verdict(row, tests.get(index))[1]}.")
    if tables["tests"]:
        lines += ["", "## The tests, seed against seed", "", *table_lines(tables["tests"])]
    lines += ["", "## Jobs", "", *table_lines(tables["jobs"])]
    with atomic_file(path) as tmp:
        tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")


def write_csv(path: Path, table: list[dict[str, str]]) -> None:
    with atomic_file(path) as tmp, open(tmp, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(table[0]) if table else ["row"])
        writer.writeheader()
        writer.writerows(table)


def write_plot(path: Path, title: str, rows: list[dict], varied: list[str]) -> None:
    """Val and test BLEU per row: each seed a dot, mean +- std as an error bar; the base row shaded."""
    import matplotlib.pyplot as plt

    width = max(5.0, 1.2 * len(rows))
    fig, ax = plt.subplots(figsize=(width, 3.8))
    for offset, (key, name, marker) in zip((-0.12, 0.12), (("val/bleu_best", "val BLEU", "o"),
                                                            ("test/bleu", "test BLEU", "s"))):
        means, stds, xs = [], [], []
        for x, row in enumerate(rows):
            values = [job["metrics"][key] for job in done(row) if isinstance(job["metrics"].get(key), int | float)]
            if not values:
                continue
            ax.scatter([x + offset] * len(values), values, s=14, alpha=0.45, marker=marker, color=f"C{offset > 0:d}")
            xs.append(x + offset)
            means.append(statistics.mean(values))
            stds.append(statistics.stdev(values) if len(values) > 1 else 0.0)
        ax.errorbar(xs, means, yerr=stds, fmt=marker + "-", capsize=4, color=f"C{offset > 0:d}",
                    label=f"{name} (mean ± std)")
    for x, row in enumerate(rows):
        if row["is_base"]:
            ax.axvspan(x - 0.4, x + 0.4, color="0.9", zorder=0)
    labels = [", ".join(str(v) for v in row["settings"].values()) or "all" for row in rows]
    labels = [f"{label}\n(base)" if row["is_base"] else label for label, row in zip(labels, rows)]
    ax.set_xticks(range(len(rows)), labels, fontsize=8)
    ax.set_xlabel(", ".join(varied) or "row")
    ax.set_ylabel("BLEU")
    ax.set_title("\n".join(textwrap.wrap(title, int(11 * width))), fontsize=10)  # about 11 characters an inch
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    plots.save(fig, path, dpi=120)


def write_curves(path: Path, title: str, jobs: list[dict], varied: list[str]) -> int:
    """The learning curves of every job that has them in one figure; returns how many jobs had them."""
    runs = {}
    for job in jobs:
        curves = job["folder"] / "plots" / "curves.csv"
        if curves.is_file():
            label = ", ".join(f"{k}={job['settings'].get(k, '')}" for k in [*varied, SEED] if k in job["settings"])
            runs[label or f"job {job['job']}"] = read_curves(curves)
    if runs:
        plots.save(plots.curves_figure(runs, title), path)
    return len(runs)


def run(cfg: DictConfig) -> dict:
    if not cfg.get("sweep_dir"):
        raise ConfigError("task=report needs sweep_dir=PATH (a multirun directory with job folders 0/, 1/, ...)")
    metric = check_metric(cfg.get("metric", "bleu"))
    sweep_dir = Path(cfg.sweep_dir)
    jobs, varied, base = read_sweep(sweep_dir)
    rows = group_rows(jobs, varied, base, cfg.get("base_row"))
    base_row = next((row for row in rows if row["is_base"]), None)
    tests = {index: compare(row, base_row, metric) for index, row in enumerate(rows)
             if base_row is not None and not row["is_base"]}
    missing_base = no_base(varied, base) if base_row is None and len(rows) > 1 else None
    if missing_base:
        log.warning("%s", missing_base)
    tables = {"rows": row_table(rows, tests, metric), "tests": test_table(rows, tests),
              "jobs": job_table(jobs, varied, rows)}
    title = f"{sweep_dir.name}: {', '.join(varied) or 'one setting'}"
    write_markdown(sweep_dir / "report.md", title, rows, tables, tests, missing_base, metric)
    write_csv(sweep_dir / "report.csv", tables["rows"])
    write_csv(sweep_dir / "jobs.csv", tables["jobs"])
    write_csv(sweep_dir / "significance.csv", tables["tests"])
    write_plot(sweep_dir / "report.png", title, rows, varied)
    curves = write_curves(sweep_dir / "curves.png", title, jobs, varied)
    print((sweep_dir / "report.md").read_text(encoding="utf-8"))
    log.info("report of %d jobs in %d rows written to %s/report.{md,csv,png}, learning curves of %d jobs to "
             "curves.png", len(jobs), len(rows), sweep_dir, curves)
    return {"jobs": len(jobs), "done": sum(job["status"] == "done" for job in jobs), "rows": len(rows),
            "metric": metric, "differs": {index: verdict(rows[index], pairs)[0] for index, pairs in tests.items()},
            "curves": curves, "report": str(sweep_dir)}
