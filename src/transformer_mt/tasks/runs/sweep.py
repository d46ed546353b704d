"""A sweep's run folders read back (task=report): each job folder of a Hydra multirun (`0/`, `1/`,
...: its `.hydra/overrides.yaml`, then `metrics.json` as outputs.py writes it, or `error.txt` for a
failed job) as a Job, and the jobs grouped into Rows, one per setting of the keys the sweep varies
other than `seed` (a row's jobs are its seeds)."""

import json
from dataclasses import dataclass, field
from pathlib import Path

from omegaconf import OmegaConf

from transformer_mt.errors import DataError
from transformer_mt.multirun import FAILURE_FILE

SEED = "seed"
RESUME = "ckpt_path"  # not a setting: a job resumed into its own folder is the job it continues


@dataclass
class Job:
    """One job of the sweep: the overrides it ran with ({key: value}), its status (done, failed:
    why, running or killed) and its metrics.json (empty unless done)."""

    number: int
    folder: Path
    settings: dict[str, str]
    status: str
    metrics: dict = field(default_factory=dict)
    config_seed: str | None = None  # the seed of the job's config (.hydra/config.yaml)

    @property
    def seed(self) -> str | None:
        """The job's seed: its override, else its config's (a job that did not vary it)."""
        return self.settings.get(SEED) or self.config_seed

    @property
    def done(self) -> bool:
        return self.status == "done"

    def located(self, named: str, within: str = "") -> Path:
        """A path the job's metrics.json names; where it is gone, the file of that name in the job's
        folder (`within` a subfolder of it), if there is one: the sweep folder was moved."""
        path = Path(named)
        moved = self.folder / within / path.name
        return moved if not path.is_file() and moved.is_file() else path

    def test_outputs(self) -> tuple[list[str], list[str]]:
        """A finished job's test translations and references, each line a sentence."""
        texts = []
        for key, what in (("translations", "test translations"), ("references", "test references")):
            named = self.metrics.get(key)
            if not named:
                raise DataError(f"{self.folder}/metrics.json: no {key!r} ({what}), which the significance tests "
                                  "need (a run from before references were kept: evaluate it again)")
            path = self.located(named)
            if not path.is_file():
                raise DataError(f"job {self.number}: its {what} {named} are missing; the significance tests "
                                  "need them")
            texts.append(path.read_text(encoding="utf-8").splitlines())
        return texts[0], texts[1]


@dataclass
class Row:
    """One setting of the varied keys: its jobs (the seeds) in job order; the base row has is_base."""

    settings: dict[str, str | None]
    jobs: list[Job] = field(default_factory=list)
    is_base: bool = False

    def finished(self) -> list[Job]:
        return [job for job in self.jobs if job.done]

    def values(self, key: str) -> list[float]:
        """The finished jobs' numbers under `key` (a job from before the metric existed has none)."""
        return [job.metrics[key] for job in self.finished() if isinstance(job.metrics.get(key), int | float)]


@dataclass
class Sweep:
    """The jobs (by number), the keys other than `seed` whose values differ between them, and the
    sweep's own config's values of those keys (`own`: the settings of its base row)."""

    folder: Path
    jobs: list[Job]
    varied: list[str]
    own: dict[str, str | None]

    def rows(self) -> list[Row]:
        """One row per setting of the varied keys, in the order of their first jobs."""
        groups: dict[tuple, Row] = {}
        for job in self.jobs:
            key = tuple(job.settings.get(k) for k in self.varied)
            groups.setdefault(key, Row(dict(zip(self.varied, key)))).jobs.append(job)
        return list(groups.values())


def read_job(folder: Path) -> Job:
    """One job folder: its overrides, status and metrics."""
    overrides_file = folder / ".hydra" / "overrides.yaml"
    overrides = OmegaConf.load(overrides_file) if overrides_file.is_file() else []
    settings = dict(o.split("=", 1) for o in overrides if "=" in o and not o.startswith(("~", f"{RESUME}=")))
    metrics_file, failure_file = folder / "metrics.json", folder / FAILURE_FILE
    config_file = folder / ".hydra" / "config.yaml"
    seed = (OmegaConf.select(OmegaConf.load(config_file), SEED, default=None, throw_on_resolution_failure=False)
            if config_file.is_file() else None)
    job = Job(int(folder.name), folder, settings, "running or killed", config_seed=None if seed is None else str(seed))
    if metrics_file.is_file():
        job.status, job.metrics = "done", json.loads(metrics_file.read_text(encoding="utf-8"))
    elif failure_file.is_file():
        job.status = f"failed: {failure_file.read_text(encoding='utf-8').strip()}"
    return job


def read_sweep(folder: Path) -> Sweep:
    """The sweep in `folder` (task.sweep_dir): its jobs, the keys they vary and the sweep config's
    values of those (`multirun.yaml`; none without it)."""
    if not folder.is_dir():
        raise DataError(f"task.sweep_dir={folder}: no such directory")
    jobs = [read_job(f) for f in sorted((p for p in folder.iterdir() if p.is_dir() and p.name.isdigit()),
                                        key=lambda p: int(p.name))]
    if not jobs:
        raise DataError(f"task.sweep_dir={folder}: no job directories (0/, 1/, ...) in it")
    keys = list(dict.fromkeys(k for job in jobs for k in job.settings if k != SEED))
    varied = [k for k in keys if len({job.settings.get(k) for job in jobs}) > 1]
    sweep_config = OmegaConf.load(folder / "multirun.yaml") if (folder / "multirun.yaml").is_file() else None
    own = {}
    if sweep_config is not None:
        for key in varied:
            value = OmegaConf.select(sweep_config, key, default=None, throw_on_resolution_failure=False)
            own[key] = None if value is None else str(value)
    return Sweep(folder, jobs, varied, own)
