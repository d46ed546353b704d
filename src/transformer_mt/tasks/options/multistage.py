"""The task group's pipelines, each one resumable command of several stages (run folders of their
own): distill and backtranslate. Their training stages take the keys of task=train (schema.shared.
Trained), declared there once."""

from dataclasses import dataclass, field
from typing import Any

from omegaconf import DictConfig

from transformer_mt.schema.keys import MISSING, key
from transformer_mt.schema.shared import Chunked, Tagged, Trained
from transformer_mt.schema.task_base import FinishedRun, InputFile, ModelCheckpoints, Task
from transformer_mt.tasks.options.one_model import NAME
from transformer_mt.validate import BOOLEAN, PATH, PATHS, number, one_of, text

BASELINE = "a run folder (task=train's): the trained model's test translations are compared with its; null: "


@dataclass
class DistillTask(Trained, Tagged, Chunked, Task):
    """python run.py task=distill task.teacher=RUN_FOLDER|CKPT|[A.ckpt,B.ckpt] [task.baseline=RUN_FOLDER]
    [model=... data=...: the student's run]: sequence-level knowledge distillation (Kim & Rush 2016) in
    stages synthetic/ (the teacher's translations), student/ (a training run), evaluation/; the same
    command again goes on where it stopped."""

    defaults: list = field(default_factory=lambda: [{"/decoding@teacher_decoding": "beam"}, "_self_"])
    name: Any = key("distill", NAME)
    teacher: Any = key(MISSING, "a run folder (its tested checkpoint), a checkpoint, or a list of them: an "
                                "ensemble", PATHS)
    teacher_decoding: Any = key({"beam_size": 5, "length_norm": {"alpha": 1.0}},
                                "how the teacher translates (decoding=beam with beam 5 and alpha 1; decoding=... is "
                                "the student's test decoding)")
    teacher_vocabulary: Any = key(True, "the student uses the teacher's vocabularies (its first member's), as a "
                                        "model that is to replace the teacher's must; false: one trained on the "
                                        "student's data", BOOLEAN)
    originals_weight: Any = key(0.0, "> 0: the original pairs train the student too, as the first corpus with "
                                     "this weight (0: they are only validated and tested on)",
                                (number(0.0), "a number >= 0"))
    baseline: Any = key(None, BASELINE + "no comparison", PATH, nullable=True)
    translations: Any = key(None, "another task=distill run folder whose finished synthetic/ stage (the same "
                                  "teacher, sources, decoding, tag, chunking and seed) this run copies instead of "
                                  "translating: several students of one teacher's translations", PATH, nullable=True)
    until: Any = key(None, "synthetic: stop once the teacher's translations are done (before the student); null: "
                           "every stage", (one_of("synthetic"), "synthetic or null"), nullable=True)

    reads = (ModelCheckpoints("teacher"), FinishedRun("baseline"))
    shortlisted = False
    trains = True

    @staticmethod
    def runner(cfg: DictConfig) -> dict | None:  # its module's run
        from transformer_mt.tasks.distill import run
        return run(cfg)


@dataclass
class BacktranslateTask(Trained, Chunked, Task):
    """python run.py task=backtranslate task.monolingual=FILE [task.reverse=RUN_FOLDER|CKPT]
    [task.baseline=RUN_FOLDER]: back-translation (Sennrich et al. 2016; sampled, Edunov et al. 2018) in
    stages baseline/, reverse/, synthetic/, forward/ (trained on the parallel data and the tagged
    synthetic corpus), evaluation/; the same command again goes on where it stopped."""

    defaults: list = field(default_factory=lambda: [{"/decoding@reverse_decoding": "sample"}, "_self_"])
    name: Any = key("backtranslate", NAME)
    monolingual: Any = key(MISSING, "target-side text, one sentence per line", PATH)
    reverse: Any = key(None, "the reverse model (a run folder, a checkpoint or a list: an ensemble); null: "
                             "trained in reverse/", PATHS, nullable=True)
    baseline: Any = key(None, BASELINE + "trained in baseline/", PATH, nullable=True)
    reverse_decoding: Any = key({"top_p": 1.0}, "how the reverse model translates (decoding=sample: sampling "
                                                "from the whole distribution)")
    synthetic_tag: Any = key("bt", "the synthetic corpus's tag (data.corpora.NAME.tag), put before its sources "
                                   "in training (null: untagged)", (text, "a tag name (bt or <bt>)"), nullable=True)
    weight: Any = key(1.0, "how many times an epoch shows each synthetic pair (0.5: a different half each epoch)",
                      (number(0.0), "a number >= 0"))

    reads = (ModelCheckpoints("reverse"), InputFile("monolingual"), FinishedRun("baseline"))
    shortlisted = False
    trains = True

    @staticmethod
    def runner(cfg: DictConfig) -> dict | None:  # its module's run
        from transformer_mt.tasks.backtranslate import run
        return run(cfg)
