"""task=push: upload a Hugging Face export (task=export task.format=hf) to the hub with huggingface_hub.

    python run.py task=push task.folder=exported/hf task.repo_id=USER/NAME [task.private=false]

The token is huggingface_hub's (`hf auth login` or HF_TOKEN). Offline (HF_HUB_OFFLINE=1) or when
the hub cannot be reached, one line says so and the exit status is 1.
"""

import logging
from pathlib import Path

from omegaconf import DictConfig

from transformer_mt.errors import ConfigError, DataError, HubError

log = logging.getLogger(__name__)


def run(cfg: DictConfig) -> dict:
    options = cfg.task
    if not options.get("folder") or not options.get("repo_id"):
        raise ConfigError("task=push needs task.folder=DIR (written by task=export task.format=hf) and "
                          "task.repo_id=USER/NAME")
    folder = Path(options.folder)
    if not (folder / "config.json").is_file() or not (folder / "tokenizer_config.json").is_file():
        raise DataError(f"task.folder={folder}: not a Hugging Face export (no config.json and "
                          "tokenizer_config.json); write one with task=export task.format=hf")
    from huggingface_hub import HfApi, constants

    if constants.HF_HUB_OFFLINE:
        raise HubError(f"task=push: HF_HUB_OFFLINE is set, so {options.repo_id} cannot be reached; unset it to upload")
    api = HfApi()
    try:
        api.create_repo(options.repo_id, private=bool(options.private), exist_ok=True)
        commit = api.upload_folder(folder_path=str(folder), repo_id=options.repo_id,
                                   commit_message=options.commit_message)
    except Exception as err:  # network, authentication, permissions: the hub's own message, on one line
        reason = " ".join(str(err).split()) or type(err).__name__
        raise HubError(f"task=push: the hub did not take {folder} as {options.repo_id}: {reason[:300]}") from err
    log.info("uploaded %s to %s", folder, commit)
    print(commit)
    return {"repo_id": options.repo_id, "commit": str(commit)}
