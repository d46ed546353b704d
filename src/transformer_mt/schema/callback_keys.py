"""The `callbacks` group (conf/callbacks/*.yaml, conf/callbacks_always.yaml): a set of callbacks by
name, each a constructor call. Ours (training/) that take settings are declared here, one node each,
which the YAML extends where it places them (`/schema_callbacks_NAME@NAME`); Lightning's own
(ModelCheckpoint, EarlyStopping, Timer, ...) take and check their constructors' arguments."""

from dataclasses import dataclass
from typing import Any

from transformer_mt.schema.keys import Group, key
from transformer_mt.validate import AT_LEAST_0, AT_LEAST_1, BOOLEAN, number, one_of, text

POSITIVE = (number(0.0, low_open=True), "a number > 0")


@dataclass
class LastCheckpointNode(Group):
    """callbacks.last_checkpoint: checkpoints/last.ckpt, the latest full training state, and the stop on
    Ctrl-C / SIGTERM after the running batch."""

    _target_: Any = key("transformer_mt.training.last_checkpoint.LastCheckpoint", "the callback's class")
    dirpath: Any = key("${paths.output_dir}/checkpoints", "the folder of last.ckpt", (text, "a path"))
    filename: Any = key("last.ckpt", "the checkpoint's file name", (text, "a file name"))
    every_n_steps: Any = key(500, "written every this many optimizer steps (null: not by steps)", AT_LEAST_1,
                             nullable=True)
    every_n_minutes: Any = key(10.0, "written every this many minutes (null: not by time)", POSITIVE, nullable=True)
    rerun: Any = key(None, "what a stop says to go on with (a pipeline's training stage: its command)",
                     nullable=True)


@dataclass
class StepMeterNode(Group):
    """callbacks.step_meter: tokens per second, TFLOP/s, MFU, padding and the gradient norm of logged steps."""

    _target_: Any = key("transformer_mt.training.step_meter.StepMeter", "the callback's class")
    peak_flops: Any = key(None, "peak FLOP/s of one device at the run's precision, for train/mfu; null: known GPUs "
                                "(H100, A100, ...)", POSITIVE, nullable=True)


@dataclass
class DashboardNode(Group):
    """callbacks.dashboard: after every validation a table of fixed validation sentences and
    cross-attention heatmaps (also plots/attention/*.png); at the end the test translations."""

    _target_: Any = key("transformer_mt.training.dashboard.TranslationDashboard", "the callback's class")
    plot_dir: Any = key("${paths.output_dir}/plots", "where the heatmaps are written", (text, "a path"))
    num_sentences: Any = key(8, "validation sentences shown (the first of the split, the same each time)",
                             AT_LEAST_0)
    num_attention: Any = key(2, "of those, how many get a cross-attention heatmap", AT_LEAST_0)
    attention_layer: Any = key(-1, "the decoder layer of the heatmaps, a python index (-1: the last; checked "
                                   "against the model when the run starts)",
                               (lambda v: isinstance(v, int) and not isinstance(v, bool), "an integer"))
    attention_heads: Any = key("mean", "mean: one panel | all: one panel per head",
                               (one_of("mean", "all"), "mean or all"))
    every_n_validations: Any = key(1, "validations between dashboards", AT_LEAST_1)
    test_table: Any = key(True, "the test translations as a table at the end", BOOLEAN)
    upload_best_checkpoint: Any = key(False, "best.ckpt as a wandb artifact at the end of training", BOOLEAN)


CALLBACKS = {"last_checkpoint": LastCheckpointNode, "step_meter": StepMeterNode, "dashboard": DashboardNode}
