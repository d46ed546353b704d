"""Entry point: `python run.py [task=train|evaluate] [group=option ...] [key=value ...]`."""

import os
import sys
from pathlib import Path

import hydra
from omegaconf import DictConfig

os.environ.setdefault("PROJECT_ROOT", str(Path(__file__).resolve().parent))


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg: DictConfig):
    from transformer_mt.errors import find_user_error
    from transformer_mt.tasks import run

    try:
        return run(cfg)
    except Exception as err:
        user_error = find_user_error(err)
        if user_error is None:
            raise
        print(f"error: {user_error}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
