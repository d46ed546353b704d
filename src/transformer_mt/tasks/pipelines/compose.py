"""A stage's run config: what `python run.py` would see with the pipeline's own command-line
overrides (less those of the pipeline's task, its folder and checkpoint) and the stage's, composed
by Hydra within the running job (its config search path, its `experiment=` and groups)."""

import re

from hydra import compose
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, open_dict

# the pipeline's own keys, which no stage inherits
PIPELINE_KEYS = re.compile(r"^[+~]*(task|hydra|ckpt_path)([.=]|$)")
SHAPING_KEYS = re.compile(r"^[+~]*(data|model|optim|module|seed|experiment|tokens_per_update)([.=@/]|$)")
# keys of those groups that say how a stage runs, not what it trains: another value resumes the stage
RUNNING_KEYS = re.compile(r"^[+~]*(data\.num_workers|data\.num_proc|module\.compile)(=|$)")


def passed_on() -> list[str]:
    """The pipeline job's command-line overrides that its training stages take too (model=,
    data=, trainer=, seed=, experiment= ...)."""
    return [o for o in HydraConfig.get().overrides.task if not PIPELINE_KEYS.match(o)]


def shaping(overrides: list[str]) -> list[str]:
    """The overrides that shape what a stage trains (its data, model, optimizer, seed, module): a
    change to one of them redoes the stage; the others (the trainer's budget, callbacks, loggers)
    reach its resume, which honours them or says why not (tasks/runs/resume.py), as do the DataLoader
    workers, the encoding processes and module.compile, which change how it runs."""
    return [o for o in overrides if SHAPING_KEYS.match(o) and not RUNNING_KEYS.match(o)]


def stage_config(output_dir: str, overrides: list[str]) -> DictConfig:
    """The config of `python run.py <passed_on()> OVERRIDES` with its run folder at `output_dir`."""
    cfg = compose(config_name=HydraConfig.get().job.config_name, overrides=[*passed_on(), *overrides])
    with open_dict(cfg):
        cfg.paths.output_dir = output_dir
    return cfg
