"""The `optim` group (conf/optim/*.yaml): the optimizer (torch.optim.Adam by default) and the
learning-rate schedule (training/schedule.py: noam, inverse_sqrt), one node per option; each option's
YAML extends its node here (its defaults list names schema_optim_NAME). A key of torch's optimizer
that no node declares is still the optimizer's with `+` (`+optim.optimizer.amsgrad=true`)."""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from transformer_mt.schema.keys import Group, key
from transformer_mt.validate import AT_LEAST_1, BOOLEAN, number

POSITIVE = (number(0.0, low_open=True), "a number > 0")
BETAS = (lambda v: isinstance(v, Sequence) and not isinstance(v, str) and len(v) == 2
         and all(map(number(0.0, 1.0, high_open=True), v)), "two numbers in [0, 1)")


@dataclass
class AdamNode(Group):
    """torch.optim.Adam's arguments, built by the LightningModule around its parameters."""

    _target_: Any = key("torch.optim.Adam", "the optimizer's class")
    _partial_: Any = key(True, "built later, around the model's parameters")
    lr: Any = key(1.0, "the learning rate (with noam: its factor; with inverse_sqrt: the peak)", POSITIVE)
    betas: Any = key([0.9, 0.98], "Adam's beta1 and beta2", BETAS)
    eps: Any = key(1.0e-09, "Adam's epsilon (added to the denominator)", POSITIVE)
    weight_decay: Any = key(0.0, "an L2 penalty on the weights", (number(0.0), "a number >= 0"))
    fused: Any = key(True, "one kernel for all parameters (CPU and CUDA)", BOOLEAN, nullable=True)


@dataclass
class DerivedPeakAdamNode(AdamNode):
    """optim=finetune's Adam, whose peak learning rate may be derived from the starting model's."""

    lr: Any = key(None, "the peak learning rate; null: peak_fraction x the starting model's peak (model.init_from)",
                  POSITIVE, nullable=True)


@dataclass
class NoamNode(Group):
    """The paper's schedule: lr * d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5)."""

    _target_: Any = key("transformer_mt.training.schedule.noam", "the schedule's function")
    _partial_: Any = key(True, "built later, around the optimizer")
    d_model: Any = key("${model.d_model}", "the width the schedule scales by (the model's)", AT_LEAST_1)
    warmup_steps: Any = key(4000, "steps of linear warm-up", AT_LEAST_1)


@dataclass
class InverseSqrtNode(Group):
    """fairseq's inverse_sqrt: linear warm-up from warmup_init_lr to lr, then lr * sqrt(warmup_steps / step)."""

    _target_: Any = key("transformer_mt.training.schedule.inverse_sqrt", "the schedule's function")
    _partial_: Any = key(True, "built later, around the optimizer")
    warmup_steps: Any = key(4000, "steps of linear warm-up", AT_LEAST_1)
    warmup_init_lr: Any = key(1.0e-07, "the learning rate warm-up starts from", (number(0.0), "a number >= 0"))


@dataclass
class NoamOptim(Group):
    """optim=noam: the paper's Adam(0.9, 0.98, eps 1e-9) and schedule; optimizer.lr is the factor (1.0)."""

    optimizer: Any = key(AdamNode(), "the optimizer (optim.optimizer.*)")
    scheduler: Any = key(NoamNode(), "the learning-rate schedule (optim.scheduler.*)")


@dataclass
class InverseSqrtOptim(Group):
    """optim=inverse_sqrt: fairseq's schedule, peaking at optimizer.lr."""

    optimizer: Any = key(AdamNode(lr=5.0e-04), "the optimizer (optim.optimizer.*)")
    scheduler: Any = key(InverseSqrtNode(), "the learning-rate schedule (optim.scheduler.*)")


@dataclass
class FinetuneOptim(Group):
    """optim=finetune: for a model.init_from run, inverse_sqrt after a short warm-up peaking at
    peak_fraction of the starting model's peak (a Marian folder, which records none: marian_peak)."""

    optimizer: Any = key(DerivedPeakAdamNode(), "the optimizer (optim.optimizer.*; lr null: derived)")
    scheduler: Any = key(InverseSqrtNode(warmup_steps=100), "the learning-rate schedule (optim.scheduler.*)")
    peak_fraction: Any = key(0.1, "the peak, a fraction of the starting model's", POSITIVE)
    marian_peak: Any = key(5.0e-05, "the peak when the starting model is a Marian folder", POSITIVE)


@dataclass
class AutoOptim(NoamOptim):
    """optim=auto: the default, noam's keys for a run from scratch; with model.init_from, `finetune`'s
    (optim=finetune's keys, held as optim.finetune)."""

    finetune: Any = key(FinetuneOptim(), "the keys a model.init_from run trains with (optim.finetune.*)")


OPTIMS = {"auto": AutoOptim, "noam": NoamOptim, "inverse_sqrt": InverseSqrtOptim, "finetune": FinetuneOptim}
