"""The `module` node: the LightningModule's arguments (training/module.py's TranslationModule). The
build step (tasks/runs/build.py) adds what the run settles before building it: the model's keys, the
vocabularies, the data and model.init_from's weights."""

from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig

from transformer_mt.schema.keys import Group, key
from transformer_mt.validate import AT_LEAST_0, AT_LEAST_1, BOOLEAN, PROBABILITY, Refusal, one_of, text

COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


@dataclass
class ModuleGroup(Group):
    """The LightningModule: the loss, the training step's compilation, validation's samples."""

    _target_: Any = key("transformer_mt.training.TranslationModule", "the LightningModule's class")
    optimizer: Any = key("${optim.optimizer}", "the optimizer (the optim group's)")
    scheduler: Any = key("${optim.scheduler}", "the learning-rate schedule (the optim group's)")
    label_smoothing: Any = key(0.1, "label smoothing of the loss (the paper: 0.1)", PROBABILITY)
    decoding: Any = key("${decoding}", "the test's decoding (the decoding group)")
    quantize: Any = key("${quantize}", "how test decodes (the top-level quantize)")
    val_decoding: Any = key("${oc.select:val_decoding,null}", "validation's decoding (null: `decoding`)")
    num_samples: Any = key(3, "validation translations logged each epoch", AT_LEAST_0)
    max_nonfinite_steps: Any = key(3, "stop after this many consecutive steps with a NaN / inf loss (they are "
                                      "skipped, not applied)", AT_LEAST_1)
    compile: Any = key(False, "torch.compile the training step by regions (one encoder layer, one decoder layer, "
                              "the output layer + loss): false | true (inductor) | a backend name; worth it on a "
                              "GPU, minutes of compiling on a CPU", (lambda v: BOOLEAN[0](v) or text(v),
                                                                      "true, false or a backend name"))
    compile_mode: Any = key(None, "inductor's mode for module.compile: null (torch's default) | reduce-overhead "
                                  "(CUDA graphs; wants fixed shapes, data.shape_grid) | max-autotune | "
                                  "max-autotune-no-cudagraphs", (one_of(*COMPILE_MODES), "null, default, "
                                                                 "reduce-overhead, max-autotune or "
                                                                 "max-autotune-no-cudagraphs"),
                            nullable=True)
    shape_grid: Any = key("${oc.select:data.shape_grid,null}", "data.shape_grid's K: the compiled regions on "
                                                                "static shapes (one graph per shape)")
    vocab_multiple: Any = key(1, "the output layer + fused loss over the vocabulary padded to a multiple of this "
                                 "(e.g. 128: whole GPU tiles); the loss and gradients are unchanged",
                              AT_LEAST_1)
    activation_checkpointing: Any = key(False, "recompute each layer's activations in the backward pass instead of "
                                               "keeping them: the same gradients, less memory, about a third more "
                                               "compute (worth it where memory bounds the batch: a 600M model on "
                                               "a GPU)", BOOLEAN)

    @staticmethod
    def refusal(node: DictConfig, prefix: str) -> Refusal:
        """compile_mode is a mode of inductor's (module.compile=true or inductor)."""
        backend, mode = node.compile, node.compile_mode
        if mode is not None and backend not in (True, "inductor"):
            return f"{prefix}compile_mode={mode}: a mode of inductor's, not of {prefix}compile={backend}"
        return None
