"""task=push: upload a Hugging Face export (task=export format=hf) to the hub with huggingface_hub.

    python run.py task=push folder=exported/hf repo_id=USER/NAME [private=false]

The token is huggingface_hub's (`hf auth login` or HF_TOKEN). Offline (HF_HUB_OFFLINE=1) or when
the hub cannot be reached, one line says so and the exit status is 1.
"""

import logging
from pathlib import Path

from omegaconf import DictConfig

from transformer_mt.errors import ConfigError, HubError

log = logging.getLogger(__name__)


def run(cfg: DictConfig) -> dict:
    if not cfg.get("folder") or not cfg.get("repo_id"):
        raise ConfigError("task=push needs folder=DIR (written by task=export format=hf) and repo_id=USER/NAME")
    folder = Path(cfg.folder)
    if not (folder / "config.json").is_file() or not (folder / "tokenizer_config.json").is_file():
        raise ConfigError(f"folder={folder}: not a Hugging Face export (no config.json and tokenizer_config.json); "
                          "write one with task=export format=hf")
    from huggingface_hub import HfApi, constants

    if constants.HF_HUB_OFFLINE:
        raise HubError(f"task=push: HF_HUB_OFFLINE is set, so {cfg.repo_id} cannot be reached; unset it to upload")
    api = HfApi()
    try:
        api.create_repo(cfg.repo_id, private=bool(cfg.private), exist_ok=True)
        commit = api.upload_folder(folder_path=str(folder), repo_id=cfg.repo_id, commit_message=cfg.commit_message)
    except Exception as err:  # network, authentication, permissions: the hub's own message, on one line
        reason = " ".join(str(err).split()) or type(err).__name__
        raise HubError(f"task=push: the hub did not take {folder} as {cfg.repo_id}: {reason[:300]}") from err
    log.info("uploaded %s to %s", folder, commit)
    print(commit)
    return {"repo_id": cfg.repo_id, "commit": str(commit)}
