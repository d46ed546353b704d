"""What the tasks share: building the trainer, reading checkpoints, writing and printing results."""

import json
import logging
import math
from pathlib import Path

import lightning as L
import torch
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from hydra.utils import instantiate
from omegaconf import DictConfig
from rich.console import Console
from rich.table import Table

from transformer_mt.atomic import atomic_file
from transformer_mt.errors import ConfigError, find_user_error
from transformer_mt.tasks.wandb_online import start_online
from transformer_mt.training.results import EvalResults, Row

log = logging.getLogger(__name__)


def build_trainer(cfg: DictConfig, with_logger: bool = True, with_callbacks: bool = True, **derived) -> L.Trainer:
    """The Trainer of `cfg.trainer` with the loggers of `cfg.logger`, the callbacks of `cfg.callbacks`
    and what the run derives (`derived`, e.g. accumulate_grad_batches); a value the Trainer rejects
    is reported as a config error naming `trainer`. An online wandb logger starts its run here
    (wandb_online.py: no network or no API key is a config error at once)."""
    callbacks = [instantiate(c) for c in (cfg.get("callbacks") or {}).values() if c] if with_callbacks else []
    loggers = {key: instantiate(lg, **wandb_names(cfg, lg)) for key, lg in (cfg.get("logger") or {}).items()
               if lg and with_logger}
    for key, logger in loggers.items():
        if not cfg.logger[key].get("offline", False):
            start_online(logger, key)
    try:
        return instantiate(cfg.trainer, callbacks=callbacks, logger=list(loggers.values()) if with_logger else False,
                           **derived)
    except Exception as err:
        if find_user_error(err) is not None:
            raise
        cause = err
        while cause.__cause__ is not None:
            cause = cause.__cause__
        message = str(cause).strip().splitlines()[0] if str(cause).strip() else type(cause).__name__
        raise ConfigError(f"trainer: {message}") from err


def wandb_names(cfg: DictConfig, logger: DictConfig) -> dict[str, str]:
    """A wandb run's name and group where its config leaves them null: the name is the job's
    command-line overrides (or its run directory's name), the group the sweep (experiment preset and
    multirun directory) or, for a single run, the experiment preset."""
    if not str(logger.get("_target_", "")).endswith("WandbLogger") or not HydraConfig.initialized():
        return {}
    hydra = HydraConfig.get()
    overrides = [o for o in hydra.overrides.task if not o.lstrip("+~").startswith(("hydra.", "paths."))]
    experiment = hydra.runtime.choices.get("experiment")
    group = experiment
    if hydra.mode == RunMode.MULTIRUN:
        group = "/".join(part for part in (experiment, Path(hydra.sweep.dir).name) if part)
    names = {"name": " ".join(overrides) or Path(cfg.paths.output_dir).name, "group": group}
    return {key: value for key, value in names.items() if logger.get(key) is None and value}


def overridden_keys() -> set[str]:
    """The keys set on the command line (`data=multi30k` -> data, `+a.b=1` -> a.b); empty outside Hydra."""
    if not HydraConfig.initialized():
        return set()
    return {o.split("=", 1)[0].lstrip("+~") for o in HydraConfig.get().overrides.task}


def describe_corpus(data: dict) -> str:
    """One line naming a data config's corpus: its class and its plain options."""
    corpus = dict(data.get("corpus") or {})
    name = str(corpus.pop("_target_", "?")).rsplit(".", 1)[-1]
    return f"{name}({', '.join(f'{k}={v}' for k, v in corpus.items() if not isinstance(v, dict | list))})"


def checkpoint_path(cfg: DictConfig) -> Path:
    """cfg.ckpt_path, checked to exist."""
    if not cfg.get("ckpt_path"):
        raise ConfigError("this task needs ckpt_path=PATH (a checkpoint written by task=train)")
    path = Path(cfg.ckpt_path)
    if not path.is_file():
        raise ConfigError(f"ckpt_path={path}: no such file")
    return path


def read_checkpoint(path: Path) -> dict:
    """A checkpoint loaded as plain data (weights_only=True, on the CPU). Memory-mapped: tensors are
    read only when used, so looking at a checkpoint's tokenizer or metrics costs little."""
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as err:  # a truncated or foreign file: say which one
        reason = err.__class__.__name__
        raise ConfigError(f"ckpt_path={path}: not a readable transformer-mt checkpoint ({reason})") from err
    if not isinstance(checkpoint, dict) or not isinstance(checkpoint.get("state_dict"), dict) \
            or "model" not in (checkpoint.get("hyper_parameters") or {}):
        raise ConfigError(f"ckpt_path={path}: not a transformer-mt checkpoint (it has no state_dict and model "
                          "hyper-parameters)")
    return checkpoint


def checkpoint_tokenizer(checkpoint: dict) -> dict | None:
    """The vocabularies of a checkpoint as plain data: the module's `tokenizer` hyper-parameter, or
    where checkpoints written before it kept them (a top-level "tokenizer": that dict, or in the
    first checkpoints one joint `tokenizers` JSON string)."""
    saved = checkpoint.get("hyper_parameters", {}).get("tokenizer") or checkpoint.get("tokenizer")
    if isinstance(saved, str):
        saved = {"src": {"kind": "tokenizers", "data": saved}, "tgt": None}
    return saved


def load_module(path: Path, decoding: dict | DictConfig | None = None):
    """A ready TranslationModule (eval mode, on the CPU) built from a checkpoint, read once with
    weights_only=True: its hyper-parameters, its weights as `initial_weights`; with `decoding`, it
    searches with that strategy instead of its own."""
    from transformer_mt.training.module import TranslationModule, plain

    checkpoint = read_checkpoint(path)
    hparams = dict(checkpoint["hyper_parameters"])
    if "tokenizer" not in hparams:  # written before the tokenizer was a hyper-parameter
        hparams["tokenizer"] = checkpoint_tokenizer(checkpoint)
        if hparams["tokenizer"] is None:
            raise ConfigError(f"ckpt_path={path}: the checkpoint has no tokenizer")
    if decoding is not None:
        hparams["decoding"] = plain(decoding)
    weights = {name.removeprefix("model."): value for name, value in checkpoint["state_dict"].items()}
    return TranslationModule(**hparams, initial_weights=weights).eval()


def finite_or_none(value):
    """JSON has no NaN or infinity: such numbers become null (recursively)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite_or_none(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite_or_none(v) for v in value]
    return value


def write_json(path: Path, data: dict) -> None:
    """Valid JSON (NaN and infinities written as null), written whole."""
    with atomic_file(path) as tmp:
        tmp.write_text(json.dumps(finite_or_none(data), indent=2, sort_keys=True, allow_nan=False) + "\n",
                       encoding="utf-8")


def write_translations(path: Path, rows: tuple[Row, ...], field: str = "hypothesis") -> None:
    """One hypothesis (or reference) per line, in the order of the input file."""
    with atomic_file(path) as tmp:
        tmp.write_text("".join(getattr(row, field) + "\n" for row in rows), encoding="utf-8")


def write_results(output_dir: Path, stage: str, results: EvalResults, extra: dict) -> dict:
    """metrics.json, `{stage}.translations.txt` and `{stage}.references.txt` (the references as
    scored, for significance tests: task=report) in the run directory, each written whole; returns
    the metrics."""
    output_dir.mkdir(parents=True, exist_ok=True)
    metrics = {**results.metrics, "bleu_signature": results.bleu_signature,
               "chrf_signature": results.chrf_signature, **extra}
    translations = output_dir / f"{stage}.translations.txt"
    references = output_dir / f"{stage}.references.txt"
    write_translations(translations, results.rows)
    write_translations(references, results.rows, "reference")
    metrics["translations"], metrics["references"] = str(translations), str(references)
    write_json(output_dir / "metrics.json", metrics)
    return metrics


TOKENIZED_BLEU = (False, True, "compound")


def tokenized_bleu_extra(split: str, rows: tuple[Row, ...], mode: bool | str = True) -> dict:
    """task.tokenized_bleu: with true, `<split>/bleu_tok_lc` (13a-tokenized, lowercased BLEU); with
    compound, `<split>/bleu_tok_compound` (the paper's: tokenized, compounds split); and its signature."""
    from transformer_mt.evaluation.metrics import compound_split_bleu, tokenized_lowercased_bleu

    if mode not in TOKENIZED_BLEU:
        raise ConfigError(f"task.tokenized_bleu={mode!r}: must be false, true (13a-tokenized, lowercased) or "
                          "compound (the paper's: tokenized, hyphenated compounds split)")
    hyps, refs = [r.hypothesis for r in rows], [r.reference for r in rows]
    if mode == "compound":
        scores = compound_split_bleu(hyps, refs)
        return {f"{split}/bleu_tok_compound": scores["bleu_tok_compound"],
                "bleu_tok_compound_signature": scores["bleu_tok_compound_signature"]
                + " (13a-tokenized, compounds split as get_ende_bleu.sh)"}
    scores = tokenized_lowercased_bleu(hyps, refs)
    return {f"{split}/bleu_tok_lc": scores["bleu_tok_lc"],
            "bleu_tok_lc_signature": scores["bleu_tok_lc_signature"] + " (13a-tokenized, lowercased)"}


def print_summary(title: str, metrics: dict, rows: tuple[Row, ...], samples: int = 3) -> None:
    """Final metrics and a few translations, for the terminal."""
    console = Console()
    table = Table(title=title, show_header=False)
    for key, value in metrics.items():
        table.add_row(key, f"{value:.2f}" if isinstance(value, float) else str(value))
    console.print(table)
    for row in rows[:samples]:
        console.print(f"[bold]src[/bold] {row.source}\n[bold]ref[/bold] {row.reference}\n"
                      f"[bold]hyp[/bold] {row.hypothesis}\n", highlight=False)
