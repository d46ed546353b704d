"""A pipeline's stages: each one a subfolder of the pipeline's run folder, with the fingerprint of
its inputs in `stage.json`. A stage whose inputs changed (another teacher, another source file,
other decoding options) is redone, and every stage after it, and the log says why; a stage that
finished (`done` in its stage.json) is skipped; one that stopped part-way goes on from what it
left (its chunks, its last.ckpt). A training stage's budget (trainer.max_steps, max_epochs,
max_time) is not an input: another budget trains it on from its last.ckpt, as a resume does
(tasks/runs/resume.py), and redoes every stage after it."""

import json
import logging
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from transformer_mt.atomic import atomic_dir, atomic_file
from transformer_mt.data.cache_entry import digest
from transformer_mt.errors import DataError

log = logging.getLogger(__name__)

RECORD = "stage.json"


def differing(before, now, prefix: str = "") -> list[str]:
    """The dotted keys at which two JSON values differ (a key of one missing from the other included)."""
    if isinstance(before, dict) and isinstance(now, dict):
        return [key for name in sorted({*before, *now}) for key in differing(before.get(name), now.get(name),
                                                                             f"{prefix}{name}.")]
    return [prefix.rstrip(".")] if before != now else []


@dataclass(frozen=True)
class Stage:
    """Stage `name` of a pipeline, in `folder`; `inputs`: what its result depends on (JSON);
    `budget`: a training stage's trainer budget (another one trains it on)."""

    name: str
    folder: Path
    inputs: dict
    budget: dict = field(default_factory=dict)

    @property
    def fingerprint(self) -> str:
        return digest(self.inputs)

    def recorded(self) -> dict:
        path = self.folder / RECORD
        return json.loads(path.read_text()) if path.is_file() else {}

    def done(self) -> bool:
        return self.recorded().get("done") is True and not self.budget_changed()

    def budget_changed(self) -> bool:
        """Work was done in the folder with another budget than this one."""
        recorded = self.recorded()
        return bool(recorded) and recorded.get("budget", {}) != json.loads(json.dumps(self.budget, default=str))

    def changed(self) -> list[str]:
        """The inputs that differ from those the folder's work was done with, down to the keys inside
        a nested one (`training.model.heads`) ([] when none, or no work yet)."""
        before = self.recorded().get("inputs")
        if before is None:
            return []
        return differing(before, json.loads(json.dumps(self.inputs, default=str)))

    def start(self) -> None:
        """Record the inputs the work in the folder is done with (not done yet)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        self.write(done=False)

    def finish(self) -> None:
        self.write(done=True)

    def write(self, done: bool) -> None:
        with atomic_file(self.folder / RECORD) as tmp:
            tmp.write_text(json.dumps({"stage": self.name, "fingerprint": self.fingerprint, "done": done,
                                       "inputs": self.inputs, "budget": self.budget}, indent=2, default=str) + "\n")


def redo_changed(stages: list[Stage]) -> None:
    """Discard the work of the first stage whose inputs changed, and of every stage after it (after
    a training stage whose budget changed: of every stage after it, the stage trains on), saying
    why in the log."""
    for i, stage in enumerate(stages):
        changed, budget = stage.changed(), stage.budget_changed()
        if changed:
            log.info("%s: its inputs changed (%s): redoing it and every stage after it", stage.name,
                     ", ".join(changed))
        elif budget:
            log.info("%s: trained with %s, now %s: training on from its last checkpoint and redoing every stage "
                     "after it", stage.name, stage.recorded().get("budget", "another budget"), stage.budget)
        if changed or budget:
            for later in stages[i + (0 if changed else 1):]:
                shutil.rmtree(later.folder, ignore_errors=True)
            return


def take_finished(stage: Stage, other: Path, key: str) -> None:
    """`stage` made by copying the same stage of another pipeline's folder `other` (`key` names the
    option that gave it): it must be done, with the same inputs. A copy, in a temporary folder
    renamed into place, so that a stop leaves no half-copied stage; nothing to do when `stage` is done."""
    if stage.done():
        return
    theirs = Stage(stage.name, Path(other) / stage.folder.name, stage.inputs)
    if not theirs.done():
        raise DataError(f"{key}={other}: its {stage.name} stage is not done ({theirs.folder})")
    changed = theirs.changed()
    if changed:
        raise DataError(f"{key}={other}: its {stage.name} stage was made with other {', '.join(changed)} than this "
                          "run's")
    shutil.rmtree(stage.folder, ignore_errors=True)
    with atomic_dir(stage.folder) as tmp:
        shutil.copytree(theirs.folder, tmp, dirs_exist_ok=True)
    log.info("%s: taken from %s (%s=%s)", stage.name, theirs.folder, key, other)
