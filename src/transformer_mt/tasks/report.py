"""task=report: the jobs of a multirun as a table like the paper's Table 3, and a plot.

    python run.py task=report sweep_dir=outputs/ablation/heads_<date>

Reads every job directory of the sweep (`0/`, `1/`, ...: its `.hydra/overrides.yaml` and
`metrics.json`) and writes into the sweep directory `report.md` (the varied settings, parameters,
training time, val perplexity, val BLEU, test BLEU; the base row marked), `report.csv` (the same
rows), `report.png` (val and test BLEU against the varied setting) and `curves.png` (train loss,
val loss and val BLEU against the step, one line per job, from each job's `plots/curves.csv`). A job without metrics is
listed as failed (with the reason from its `error.txt`) or as running / killed, never dropped.
The base row is the job whose varied settings equal the sweep's own config (`multirun.yaml`).
"""

import csv
import json
import logging
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from transformer_mt import plots
from transformer_mt.atomic import atomic_file
from transformer_mt.errors import ConfigError
from transformer_mt.multirun import FAILURE_FILE
from transformer_mt.training.curves import read_curves

log = logging.getLogger(__name__)

COLUMNS = [  # header, metrics.json key, format
    ("params (M)", "num_parameters", lambda v: f"{v / 1e6:.2f}"),
    ("train (min)", "train_seconds", lambda v: f"{v / 60:.1f}"),
    ("steps", "steps", str),
    ("val PPL", "val/ppl", lambda v: f"{v:.2f}"),
    ("val BLEU", "val/bleu_best", lambda v: f"{v:.2f}"),
    ("test BLEU", "test/bleu", lambda v: f"{v:.2f}"),
]


def read_job(folder: Path) -> dict:
    """One job: its overrides as {key: value}, status, and metrics (empty unless done)."""
    overrides_file = folder / ".hydra" / "overrides.yaml"
    overrides = OmegaConf.load(overrides_file) if overrides_file.is_file() else []
    settings = dict(o.split("=", 1) for o in overrides if "=" in o and not o.startswith("~"))
    metrics_file, failure_file = folder / "metrics.json", folder / FAILURE_FILE
    if metrics_file.is_file():
        return {"job": int(folder.name), "settings": settings, "status": "done",
                "metrics": json.loads(metrics_file.read_text(encoding="utf-8"))}
    status = f"failed: {failure_file.read_text(encoding='utf-8').strip()}" if failure_file.is_file() \
        else "running or killed"
    return {"job": int(folder.name), "settings": settings, "status": status, "metrics": {}}


def read_sweep(sweep_dir: Path) -> tuple[list[dict], list[str], dict]:
    """The jobs (by number), the keys whose values differ between them, and the base row's values."""
    if not sweep_dir.is_dir():
        raise ConfigError(f"sweep_dir={sweep_dir}: no such directory")
    jobs = [read_job(f) for f in sorted((p for p in sweep_dir.iterdir() if p.is_dir() and p.name.isdigit()),
                                        key=lambda p: int(p.name))]
    if not jobs:
        raise ConfigError(f"sweep_dir={sweep_dir}: no job directories (0/, 1/, ...) in it")
    keys = list(dict.fromkeys(k for job in jobs for k in job["settings"]))
    varied = [k for k in keys if len({job["settings"].get(k) for job in jobs}) > 1]
    sweep_config = OmegaConf.load(sweep_dir / "multirun.yaml") if (sweep_dir / "multirun.yaml").is_file() else None
    base = {}
    if sweep_config is not None:
        for key in varied:
            value = OmegaConf.select(sweep_config, key, default=None, throw_on_resolution_failure=False)
            base[key] = None if value is None else str(value)
    return jobs, varied, base


def rows(jobs: list[dict], varied: list[str], base: dict) -> list[dict[str, str]]:
    """Table rows as strings: job, varied settings, status, metric columns; the base row marked."""
    out = []
    for job in jobs:
        is_base = bool(base) and all(job["settings"].get(k) == base.get(k) for k in varied)
        row = {"job": f"{job['job']}{' (base)' if is_base else ''}"}
        row.update({k: job["settings"].get(k, "") for k in varied})
        row["status"] = job["status"]
        for header, key, fmt in COLUMNS:
            value = job["metrics"].get(key)
            row[header] = fmt(value) if isinstance(value, int | float) else ""
        out.append(row)
    return out


def write_markdown(path: Path, title: str, table: list[dict[str, str]]) -> None:
    header = list(table[0])
    lines = [f"# {title}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row[h] for h in header) + " |" for row in table]
    with atomic_file(path) as tmp:
        tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")


def write_csv(path: Path, table: list[dict[str, str]]) -> None:
    with atomic_file(path) as tmp, open(tmp, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(table[0]))
        writer.writeheader()
        writer.writerows(table)


def write_plot(path: Path, title: str, jobs: list[dict], varied: list[str], table: list[dict[str, str]]) -> None:
    """Val and test BLEU of the finished jobs against the varied setting(s), in job order."""
    import matplotlib.pyplot as plt

    done = [(job, row) for job, row in zip(jobs, table) if job["status"] == "done"]
    labels = [", ".join(job["settings"].get(k, "") for k in varied) or str(job["job"]) for job, _ in done]
    labels = [f"{label}\n(base)" if "(base)" in row["job"] else label for label, (_, row) in zip(labels, done)]
    fig, ax = plt.subplots(figsize=(max(5.0, 1.2 * len(done)), 3.6))
    x = range(len(done))
    for key, name, style in (("val/bleu_best", "val BLEU", "o--"), ("test/bleu", "test BLEU", "s-")):
        ax.plot(x, [job["metrics"].get(key, float("nan")) for job, _ in done], style, label=name)
    ax.set_xticks(list(x), labels, fontsize=8)
    ax.set_xlabel(", ".join(varied) or "job")
    ax.set_ylabel("BLEU")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    plots.save(fig, path, dpi=120)


def write_curves(path: Path, title: str, sweep_dir: Path, jobs: list[dict], varied: list[str]) -> int:
    """The learning curves of every job that has them in one figure; returns how many jobs had them."""
    runs = {}
    for job in jobs:
        curves = sweep_dir / str(job["job"]) / "plots" / "curves.csv"
        if curves.is_file():
            label = ", ".join(f"{k}={job['settings'].get(k, '')}" for k in varied) or f"job {job['job']}"
            runs[label] = read_curves(curves)
    if runs:
        plots.save(plots.curves_figure(runs, title), path)
    return len(runs)


def run(cfg: DictConfig) -> dict:
    if not cfg.get("sweep_dir"):
        raise ConfigError("task=report needs sweep_dir=PATH (a multirun directory with job folders 0/, 1/, ...)")
    sweep_dir = Path(cfg.sweep_dir)
    jobs, varied, base = read_sweep(sweep_dir)
    table = rows(jobs, varied, base)
    title = f"{sweep_dir.name}: {', '.join(varied) or 'one setting'}"
    write_markdown(sweep_dir / "report.md", title, table)
    write_csv(sweep_dir / "report.csv", table)
    write_plot(sweep_dir / "report.png", title, jobs, varied, table)
    curves = write_curves(sweep_dir / "curves.png", title, sweep_dir, jobs, varied)
    print((sweep_dir / "report.md").read_text(encoding="utf-8"))
    log.info("report of %d jobs written to %s/report.{md,csv,png}, learning curves of %d jobs to curves.png",
             len(jobs), sweep_dir, curves)
    return {"jobs": len(jobs), "done": sum(job["status"] == "done" for job in jobs), "curves": curves,
            "report": str(sweep_dir)}
