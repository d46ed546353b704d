"""Config keys that were renamed: each old spelling is refused with one line naming the new key.

The rule (README, "Configuration"): a task's own options live under `task.` (its file
`conf/task/<name>.yaml`); the top level holds what every task shares (`seed`, `ckpt_path`,
`quantize`, `progress`, ...) and the groups; every task runs on `trainer.accelerator` /
`trainer.devices`. Keys renamed to follow it are refused, not translated: a command that still
says `input=` fails at once with one line naming the new key (a preset that still sets one is
refused by Hydra's composition: the schema, transformer_mt.schema, declares no such key).
"""

from collections.abc import Iterable

from transformer_mt.errors import ConfigError

# old key -> the key (or keys) that replace it
RENAMED = {
    "input": "task.input",
    "output": "task.output",
    "source": "task.source",
    "target": "task.target",
    "checkpoints": "ckpt_path (a list: ckpt_path=[a.ckpt,b.ckpt])",
    "run_dir": "task.run_dir",
    "last_n": "task.last_n",
    "best_n": "task.best_n",
    "format": "task.format",
    "quantization": "quantize",
    "folder": "task.folder",
    "repo_id": "task.repo_id",
    "private": "task.private",
    "commit_message": "task.commit_message",
    "sweep_dir": "task.sweep_dir",
    "base_row": "task.base_row",
    "metric": "task.metric",
    "task.device": "trainer.accelerator (auto | cpu | gpu; GPU N: trainer.accelerator=gpu trainer.devices=[N])",
    "task.average_last_n": "task.last_n",
    "callbacks.training_health": "callbacks.step_meter (it also logs train/tokens_per_sec)",
}


def message(key: str) -> str:
    """The one line that refuses the old key `key`."""
    return f"{key}= was renamed: it is now {RENAMED[key]} (a task's own options live under task.)"


def refuse_old_keys(overrides: Iterable[str]) -> None:
    """A ConfigError for the first command-line override (`key=value`, `+key=...`, `~key`) that
    names a renamed key or a key inside one; Hydra's flags (`-m`, `--cfg`, ...) pass."""
    for override in overrides:
        if override.startswith("-"):
            continue
        key = override.split("=", 1)[0].lstrip("+~").split("@", 1)[0]
        for old in RENAMED:
            if key == old or key.startswith(old + "."):
                raise ConfigError(message(old))

