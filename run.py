"""Entry point: `python run.py [task=train|evaluate|translate|score|average|report|export|push|distill|
backtranslate|serve|shortlist] [group=option ...] [key=value ...]`."""

import atexit
import gc
import os
import sys
from pathlib import Path

import hydra
from hydra.errors import ConfigCompositionException
from omegaconf import DictConfig

from transformer_mt.errors import ConfigError
from transformer_mt.multirun import child_argv
from transformer_mt.renamed import refuse_old_keys
from transformer_mt.run_folder import register_resolvers
from transformer_mt.stops import STOPS, exit_stopped, stop_signals
from transformer_mt.tasks import main as run_job  # no torch nor Lightning: a task imports them once checked
from transformer_mt.tasks.options import register
from transformer_mt.tasks.options.help import OPTIONS, asked_options, task_help

os.environ.setdefault("PROJECT_ROOT", str(Path(__file__).resolve().parent))
register_resolvers()  # ${pid:} in run folder names (conf/hydra/default.yaml)
register()  # the schema (src/transformer_mt/schema): the top-level keys and the task options


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg: DictConfig) -> float | None:
    return run_job(cfg)


if __name__ == "__main__":
    # run last at exit: the interpreter's teardown then skips collecting the millions of objects torch
    # and its peers allocated at import (about 2 s a process; memory goes back to the system anyway)
    atexit.register(gc.freeze)
    sys.argv = child_argv(sys.argv, os.environ)  # a DDP rank of a multirun job runs that job
    try:
        refuse_old_keys(sys.argv[1:])  # an old spelling: one line naming its new key, before Hydra's error
    except ConfigError as err:
        sys.exit(f"error: {err}")
    if asked := asked_options(sys.argv[1:]):  # task=NAME --help (decoding=NAME, optim=NAME): its keys
        unknown = [(group, name) for group, name in asked if name not in OPTIONS[group]]
        if unknown:
            sys.exit(f"error: {task_help(unknown[0][1], unknown[0][0])}")
        print("\n\n".join(task_help(name, group) for group, name in asked))
        sys.exit(0)
    os.environ.setdefault("HYDRA_FULL_ERROR", "1")  # Hydra raises its errors here, not its own report
    try:
        with stop_signals():  # Ctrl-C and SIGTERM: one line and 130 / 143, wherever they land (stops.py)
            main()
    except ConfigCompositionException as err:  # a key or a group option that does not exist: one line
        from transformer_mt.composition import composition_error

        sys.exit(f"error: {composition_error(err, sys.argv[1:])}")
    except STOPS as stop:  # before the task started (composing the config)
        exit_stopped(stop, "before the task started")
