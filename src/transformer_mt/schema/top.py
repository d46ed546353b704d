"""The top level of the config: the keys every task shares, and the groups (each its own node,
composed from conf/<group>/*.yaml, or for `task` from this package's task classes)."""

from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig

from transformer_mt.choices import KERNELS, MATMUL_PRECISIONS, QUANTIZE
from transformer_mt.schema.architecture import ModelGroup
from transformer_mt.schema.between_groups import between_groups_refusal
from transformer_mt.schema.keys import MISSING, Group, key
from transformer_mt.schema.lightning_module import ModuleGroup
from transformer_mt.schema.trainer import TrainerGroup
from transformer_mt.validate import AT_LEAST_0, AT_LEAST_1, BOOLEAN, PATHS, Refusal, listing, one_of, text


@dataclass
class PathsGroup(Group):
    """The folders every run reads and writes (conf/paths/default.yaml)."""

    root_dir: Any = key("${oc.env:PROJECT_ROOT,.}", "the project (run.py sets PROJECT_ROOT)")
    data_dir: Any = key("${oc.env:DATA_DIR,${paths.root_dir}/data}", "the corpora's folder: $DATA_DIR, else data/ "
                                                                     "in the project")
    cache_dir: Any = key("${oc.env:TRANSFORMER_MT_CACHE,${paths.root_dir}/.cache}", "tokenizers and token ids "
                         "shared by runs: $TRANSFORMER_MT_CACHE, else .cache/ in the project")
    output_dir: Any = key("${hydra:runtime.output_dir}", "the run's folder (Hydra's)")


@dataclass
class RunConfig(Group):
    """The composed config of `python run.py`."""

    seed: Any = key(1234, "the run's seed (L.seed_everything, the data order, sampling)",
                    AT_LEAST_0)
    optimized_metric: Any = key("val/bleu_best", "the metrics.json key run.py returns to Hydra: what "
                                                 "hparams_search=optuna maximizes", (text, "a metrics.json key"))
    tags: Any = key([], "labels of the run (experiment presets set them)")
    ckpt_path: Any = key(None, "a checkpoint (or a list: an ensemble): required by evaluate, translate, score, "
                               "export; with task=train, resumes training from it; last: the run folder's own "
                               "last.ckpt (a finished run is not trained again, a stopped one resumes)", PATHS,
                         nullable=True)
    tokens_per_update: Any = key(None, "padded tokens (per side) per optimizer step, all devices together (the "
                                       "paper: 25000); sets trainer.accumulate_grad_batches",
                                 AT_LEAST_1, nullable=True)
    progress: Any = key(None, "progress bars on stderr while translating, preparing data, averaging, exporting: "
                              "null when stderr is a terminal and the work lasts over a second; true always; "
                              "false never", (BOOLEAN[0], "true, false or null"), nullable=True)
    float32_matmul_precision: Any = key("highest", "float32 matrix products (torch.set_float32_matmul_precision): "
                                                   "highest (full fp32) | high (TF32 on a GPU) | medium",
                                        (one_of(*MATMUL_PRECISIONS), "highest, high (TF32 on a GPU) or medium"))
    quantize: Any = key("none", "int8: test, evaluate, translate and score decode with an int8 copy of the linear "
                                "layers (CPU only; the checkpoint stays fp32); none: the model as it is",
                        (one_of(*QUANTIZE), listing(QUANTIZE)))
    kernels: Any = key("auto", "the kernels decoding's linear layers run on the CPU: auto (per layer shape, torch's "
                                "or oneDNN's path, whichever is faster on this CPU: measured once, kept per CPU "
                                "model in $TRANSFORMER_MT_CACHE or ~/.cache/transformer_mt/kernels.json) | default "
                                "(torch's paths)", (one_of(*KERNELS), listing(KERNELS)))
    inter_threads: Any = key(None, "decoders that run at once on the CPU, each on batches of its own in a thread of "
                                   "its own (CTranslate2's inter_threads): task=translate, task=serve, the "
                                   "pipelines' synthetic stage; null: one per core (1 on a GPU)",
                             AT_LEAST_1, nullable=True)
    intra_threads: Any = key(None, "threads each decoder's operations use (torch.set_num_threads); null: the "
                                   "cores shared out among the decoders (1 each by default)",
                             AT_LEAST_1, nullable=True)
    module: Any = key(ModuleGroup(), "the LightningModule (its keys: module.*); the build step adds the model, "
                                      "the vocabularies and the data")
    model: Any = key(ModelGroup(), "the model (conf/model/*.yaml: model=OPTION; its keys: model.*)")
    data: Any = key(MISSING, "the data group's node (conf/data/*.yaml: data=OPTION; its keys: the data sections "
                             "below, the corpora's their classes')")
    trainer: Any = key(TrainerGroup(), "the Trainer (conf/trainer/*.yaml: trainer=OPTION; its keys: trainer.*)")
    decoding: Any = key(MISSING, "the decoding group's node (conf/decoding/*.yaml: decoding=OPTION; each "
                                 "option's keys: decoding=NAME below)")
    val_decoding: Any = key(None, "validation's decoding when not `decoding`: decoding@val_decoding=greedy")
    optim: Any = key(MISSING, "the optim group's node (conf/optim/*.yaml: optim=OPTION; each option's keys: "
                              "optim=NAME below)")
    logger: Any = key(None, "the logger group's node (conf/logger/*.yaml: logger=OPTION): loggers by name, each "
                            "a constructor call; their keys: the logger=NAME sections below")
    callbacks: Any = key(MISSING, "the callbacks group's node (conf/callbacks/*.yaml: callbacks=OPTION): callbacks "
                                  "by name, each a constructor call; ours with settings: the callbacks.NAME sections "
                                  "below")
    paths: Any = key(PathsGroup(), "the folders (conf/paths/default.yaml: paths=default; its keys: paths.*)")
    task: Any = key(MISSING, "the task's options (task=NAME: train, evaluate, translate, score, average, export, "
                             "push, report, lengths, distill, backtranslate, serve, shortlist)")
    row: Any = key(None, "experiment=ablation/*: the row a sweep job runs (a key of `rows`)")
    rows: Any = key(None, "experiment=ablation/*: the settings of each row, by name")

    @staticmethod
    def refusal(node: DictConfig, prefix: str) -> Refusal:
        """The rules between groups (schema/between_groups.py)."""
        return between_groups_refusal(node)
