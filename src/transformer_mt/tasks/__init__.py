"""Tasks: one Hydra config in, one job out. The task's class (tasks/options: the option task=NAME)
names its runner, the `run(cfg)` of its module here, and declares the paths it reads and writes
(schema/task_base.py); the task group's keys are that task's options. The task node has no
`_target_`: it is no constructor call."""

import logging
import math
import sys
from contextlib import nullcontext

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from transformer_mt.config_keys import refuse_stray_additions
from transformer_mt.errors import ConfigError, find_user_error
from transformer_mt.multirun import announce_job, isolated_job, report_failure
from transformer_mt.schema.keys import check_keys
from transformer_mt.stops import STOPS, exit_stopped, raise_requested
from transformer_mt.tasks.runs.preflight import check_paths

log = logging.getLogger(__name__)


def main(cfg: DictConfig) -> float | None:
    """run.py's job: run the task and return `cfg.optimized_metric` of its metrics (what a sweeper
    such as Optuna optimizes; None when the task has no such metric).

    A user's mistake in a single run is one line on stderr and exit status 1. In a multirun, a
    failed job says why (one line `error: job N (...): ...`, or a traceback for what is no user's
    mistake) and in `error.txt` in its run directory, and the error is raised to Hydra, which records
    the job as failed and goes on with the sweep; the sweep ends with one line counting the failed
    jobs and exit status 1 (Optuna marks the trial failed and goes on).

    Ctrl-C or SIGTERM (stops.py) end the job with one line and exit status 130 / 143: the task's own
    where it says how far it got (training, a pipeline's stages, translate, the server), else one
    naming the task."""
    multirun = HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN
    if multirun:
        announce_job(HydraConfig.get().overrides.task, str(cfg.paths.output_dir))
    try:
        with isolated_job() if multirun else nullcontext():
            metrics = run(cfg)
            raise_requested()  # a stop whose exception was swallowed on the way: never a clean exit 0
    except STOPS as stop:  # a task that says no more of how far it got
        exit_stopped(stop, f"in task={cfg.task.get('name')}, before it finished: run the same command again")
    except Exception as err:
        user_error = find_user_error(err)
        if multirun:
            report_failure(cfg.paths.output_dir, err, user_error)
            raise
        if user_error is None:
            raise
        print(f"error: {user_error}", file=sys.stderr)
        sys.exit(1)
    return optimized_value(cfg, metrics)


def optimized_value(cfg: DictConfig, metrics: dict | None) -> float | None:
    """The value of `cfg.optimized_metric` in the job's metrics, if it has a finite one."""
    key = cfg.get("optimized_metric")
    value = (metrics or {}).get(key) if key else None
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


def run(cfg: DictConfig):
    """Check the composed config before torch and Lightning are imported, so that a refused command
    ends within about a second of Hydra's composition: no key added with `+` that nothing reads,
    every key the user must give has a value, every value its rule (the schema), every path the task
    reads is there (runs/preflight.py). Then run the task (runs/job.py)."""
    if HydraConfig.initialized():  # run.py's overrides: a key added with + that nothing reads
        hydra_cfg = HydraConfig.get()
        refuse_stray_additions(cfg, hydra_cfg.overrides.task, hydra_cfg.runtime.choices.keys())
    refuse_missing_values(cfg)
    check_keys(cfg)
    check_paths(cfg)
    from transformer_mt.tasks.runs.job import run_checked  # the heavy imports, once the config passed

    return run_checked(cfg)


def refuse_missing_values(cfg: DictConfig) -> None:
    """A ConfigError naming every key the composed config leaves `???` (one the user must give, such
    as data=files's data.corpora.files.data_dir or task=distill's task.teacher), before any work."""
    missing = sorted(key for key in OmegaConf.missing_keys(cfg) if not key.startswith("hydra."))  # Hydra's own
    if missing:
        keys = ", ".join(missing)
        given = " ".join(f"{key}=..." for key in missing)
        raise ConfigError(f"{keys} {'has' if len(missing) == 1 else 'have'} no value: give "
                          f"{'it' if len(missing) == 1 else 'them'} on the command line ({given})")
