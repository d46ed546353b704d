"""The `trainer` group (conf/trainer/*.yaml): Lightning's Trainer, every argument of it that a config
may set (its logger and callbacks are the `logger` and `callbacks` groups'), with our defaults."""

from dataclasses import dataclass
from typing import Any

from transformer_mt.choices import PRECISIONS
from transformer_mt.schema.keys import Group, key
from transformer_mt.validate import AT_LEAST_0, AT_LEAST_1, BOOLEAN, integer, listing, number, one_of, text

LIMIT = (number(0.0), "a number >= 0 (a fraction of the batches, or a count) or null")


@dataclass
class TrainerGroup(Group):
    """lightning.pytorch.Trainer's arguments (trainer=default | cpu | gpu | ddp | ddp_cpu)."""

    _target_: Any = key("lightning.pytorch.Trainer", "the Trainer's class")
    default_root_dir: Any = key("${paths.output_dir}", "where Lightning writes what it writes itself", (text, "a path"))
    accelerator: Any = key("auto", "cpu | gpu | auto (a GPU where torch sees one)", (text, "an accelerator name"))
    devices: Any = key(1, "devices per node (an integer, a list of ids, or auto)")
    num_nodes: Any = key(1, "machines (DDP)", AT_LEAST_1)
    strategy: Any = key("auto", "auto | ddp | ... (Lightning's strategies)", (text, "a strategy name"))
    precision: Any = key("32-true", "32-true | bf16-mixed | 16-mixed (a GPU) | ... (Lightning's precisions)",
                         (one_of(*PRECISIONS, 32, 16, 64), listing(PRECISIONS)))
    max_epochs: Any = key(20, "epochs to train (-1 or null with max_steps: no limit)",
                          (integer(-1), "an integer >= -1 (-1: no limit) or null"), nullable=True)
    min_epochs: Any = key(None, "epochs trained at least (with early stopping)", AT_LEAST_1, nullable=True)
    max_steps: Any = key(-1, "optimizer steps to train (-1: no limit)",
                         (integer(-1), "an integer >= -1 (-1: no limit)"))
    min_steps: Any = key(None, "optimizer steps trained at least", AT_LEAST_1, nullable=True)
    max_time: Any = key(None, "the longest training, DD:HH:MM:SS (the run stops and tests there)", nullable=True)
    gradient_clip_val: Any = key(0.0, "the gradients' largest norm (0: no clipping)",
                                 (number(0.0), "a number >= 0 or null"), nullable=True)
    gradient_clip_algorithm: Any = key(None, "norm (null) | value", (one_of("norm", "value"), "norm or value"),
                                       nullable=True)
    accumulate_grad_batches: Any = key(1, "batches per optimizer step (tokens_per_update sets it)",
                                       AT_LEAST_1)
    check_val_every_n_epoch: Any = key(1, "epochs between validations (null: by val_check_interval only)",
                                       AT_LEAST_1, nullable=True)
    val_check_interval: Any = key(None, "validation within an epoch: a fraction of it or a count of batches",
                                  LIMIT, nullable=True)
    log_every_n_steps: Any = key(20, "steps between logged training metrics", AT_LEAST_1)
    num_sanity_val_steps: Any = key(0, "validation batches run before training (-1: all)",
                                    (integer(-1), "an integer >= -1"))
    limit_train_batches: Any = key(None, "training batches an epoch (a fraction or a count; null: all)", LIMIT,
                                   nullable=True)
    limit_val_batches: Any = key(None, "validation batches (a fraction or a count; null: all)", LIMIT, nullable=True)
    limit_test_batches: Any = key(None, "test batches (a fraction or a count; null: all)", LIMIT, nullable=True)
    limit_predict_batches: Any = key(None, "prediction batches (a fraction or a count; null: all)", LIMIT,
                                     nullable=True)
    overfit_batches: Any = key(0.0, "train and validate on this many batches only (a fraction or a count)", LIMIT)
    fast_dev_run: Any = key(False, "true or N: one (N) batch of each stage, no checkpoints nor logs")
    use_distributed_sampler: Any = key(False, "Lightning's sampler for DDP (false: our batch sampler shards "
                                              "batches across ranks itself)", BOOLEAN)
    deterministic: Any = key(False, "deterministic kernels (true | false | warn)")
    benchmark: Any = key(False, "cudnn.benchmark", BOOLEAN)
    inference_mode: Any = key(True, "validation and test under torch.inference_mode", BOOLEAN)
    enable_checkpointing: Any = key(None, "Lightning's own checkpointing (our callbacks checkpoint)",
                                    BOOLEAN, nullable=True)
    enable_progress_bar: Any = key(None, "Lightning's progress bar", BOOLEAN, nullable=True)
    enable_model_summary: Any = key(None, "the model summary at the start", BOOLEAN, nullable=True)
    enable_autolog_hparams: Any = key(True, "the hyperparameters logged to the loggers", BOOLEAN)
    detect_anomaly: Any = key(False, "torch's anomaly detection (slow)", BOOLEAN)
    barebones: Any = key(False, "Lightning without its extras (for timing)", BOOLEAN)
    profiler: Any = key(None, "simple | advanced | pytorch | null", nullable=True)
    sync_batchnorm: Any = key(False, "synchronized batch norm (DDP)", BOOLEAN)
    reload_dataloaders_every_n_epochs: Any = key(0, "epochs between rebuilt dataloaders (0: never)",
                                                 AT_LEAST_0)
    model_registry: Any = key(None, "Lightning's model registry name", nullable=True)
    plugins: Any = key([{"_target_": "transformer_mt.training.atomic_io.AtomicCheckpointIO"}],
                       "Lightning plugins (default: checkpoints written to a temporary file beside their "
                       "destination, fsynced, then renamed)")
