"""TranslationModule: the Transformer, its loss and schedule, and decode-and-score evaluation.

Built whole from plain hyper-parameters (dicts, numbers, strings), the tokenizer and the decoding
config included, so `load_from_checkpoint` rebuilds it, also with `weights_only=True`.
"""

import logging
import math
import time

import lightning as L
import numpy as np
import torch
import torch.distributed as dist
from hydra.utils import instantiate
from lightning.fabric.utilities.seed import _collect_rng_states, _set_rng_states
from omegaconf import DictConfig, ListConfig, OmegaConf

from transformer_mt.data.tokenizer import Vocabularies
from transformer_mt.errors import TrainingDiverged
from transformer_mt.evaluation.metrics import corpus_scores
from transformer_mt.model import Transformer, TransformerConfig
from transformer_mt.model.quantize import check_quantize, quantize_int8
from transformer_mt.training.loss import output_layer_loss

log = logging.getLogger(__name__)

Row = tuple[int, str, str, str]  # example id, source, reference, hypothesis


def plain(value):
    """DictConfig / ListConfig -> dict / list (resolved); anything else unchanged."""
    return OmegaConf.to_container(value, resolve=True) if isinstance(value, DictConfig | ListConfig) else value


def architecture(model) -> dict:
    """The TransformerConfig keys of a model config (conf/model): without `init_from`, which says
    where the weights come from, not what the model is."""
    return {k: v for k, v in plain(model).items() if k != "init_from"}


def without_quantize(decoding: dict) -> dict:
    """A decoding config without its `quantize` key (which says what model the search runs on)."""
    return {k: v for k, v in decoding.items() if k != "quantize"}


def collect_rng_states() -> dict:
    """This process's torch / CUDA / numpy / python RNG states as plain data (weights_only loads it)."""
    states = _collect_rng_states(include_cuda=torch.cuda.is_available())
    name, keys, pos, has_gauss, gauss = states["numpy"]
    states["numpy"] = [name, keys.tolist(), pos, has_gauss, gauss]
    return states


def restore_rng_states(states: dict) -> None:
    """Undo collect_rng_states."""
    name, keys, pos, has_gauss, gauss = states["numpy"]
    _set_rng_states({**states, "numpy": (name, np.array(keys, dtype=np.uint32), pos, has_gauss, gauss)})


class TranslationModule(L.LightningModule):
    def __init__(
        self,
        model: dict,
        src_vocab_size: int,
        tgt_vocab_size: int,
        pad_id: int,
        bos_id: int,
        eos_id: int,
        tokenizer: dict,
        optimizer: dict,
        decoding: dict,
        scheduler: dict | None = None,
        label_smoothing: float = 0.1,
        val_decoding: dict | None = None,
        num_samples: int = 3,
        max_nonfinite_steps: int = 3,
        data: dict | None = None,
    ) -> None:
        """model: TransformerConfig fields (conf/model; `init_from` is ignored); tokenizer: the
        vocabularies as plain data (`Vocabularies.to_dict()`); optimizer / scheduler: `_partial_`
        Hydra configs (conf/optim); decoding: the search strategy of test, evaluate and translate
        (conf/decoding; give another to `load_from_checkpoint(path, decoding=...)`), whose
        `quantize: int8` decodes with an int8 copy of the model (CPU; validation never does);
        val_decoding: the one of validation, when it should be cheaper (None = decoding).
        max_nonfinite_steps: training stops after this many consecutive steps whose loss is NaN or
        inf (such steps are skipped, not applied). data: what the run trained on ({"config": the
        resolved data config, "fingerprints": per split and of the vocabularies}), kept in every
        checkpoint for task=evaluate and resume."""
        super().__init__()
        model, tokenizer = architecture(model), plain(tokenizer)
        optimizer, scheduler = plain(optimizer), plain(scheduler)
        decoding, val_decoding, data = plain(decoding), plain(val_decoding), plain(data)
        self.save_hyperparameters(logger=False)  # the loggers get the whole run config (tasks/train.py)
        self.model = Transformer(TransformerConfig(src_vocab_size=src_vocab_size, tgt_vocab_size=tgt_vocab_size,
                                                   pad_id=pad_id, **model))
        self.tokenizer = Vocabularies.from_dict(tokenizer)
        self.quantize = check_quantize(str(decoding.get("quantize", "none")))
        self.search = instantiate(without_quantize(decoding))
        self.val_search = instantiate(without_quantize(val_decoding)) if val_decoding else self.search
        self._int8: list[Transformer] = []  # the int8 copy, built when first needed (not a submodule)
        self.eval_results: dict[str, dict] = {}  # per stage: metrics and the ordered rows
        self._eval_rows: list[Row] = []
        self._eval_stats = torch.zeros(3, dtype=torch.float64)
        self.train_tokens, self.train_seconds = 0, 0.0
        self._batch_start = 0.0
        self._nonfinite_steps = 0
        self._rng_states: list[dict] | None = None  # from a checkpoint, restored when training starts

    # ------------------------------------------------------------------------------ set-up
    def on_save_checkpoint(self, checkpoint: dict) -> None:
        if not torch.stack([torch.isfinite(p).all() for p in self.parameters()]).all():  # never save NaN weights
            raise TrainingDiverged(f"train: the weights became NaN or inf at step {self.trainer.global_step} "
                                   f"(lr {self._lr():.3g}); no checkpoint was written, the earlier ones are kept")
        if self._trainer is not None and self._trainer.state.fn == "fit":
            checkpoint["rng_states"] = self._gather_rng_states()
        if "val" in self.eval_results:  # lets task=average rank epoch checkpoints (best_n)
            checkpoint["val_bleu"] = float(self.eval_results["val"]["metrics"]["val/bleu"])

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        self._rng_states = checkpoint.get("rng_states")

    def _gather_rng_states(self) -> list[dict]:
        """The torch / CUDA / numpy / python RNG states of every rank, rank 0 first."""
        states = collect_rng_states()
        if dist.is_available() and dist.is_initialized():
            gathered = [None] * dist.get_world_size()
            dist.all_gather_object(gathered, states)
            return gathered
        return [states]

    def on_train_start(self) -> None:
        """Resume: put back this rank's RNG states, so dropout draws what it would have drawn."""
        self._int8.clear()
        if self._rng_states and len(self._rng_states) == self.trainer.world_size:
            restore_rng_states(self._rng_states[self.trainer.global_rank])
        elif self._rng_states:
            log.warning("the checkpoint's RNG states are from %d processes, this run has %d: not restored",
                        len(self._rng_states), self.trainer.world_size)
        self._rng_states = None

    def configure_optimizers(self):
        optimizer = instantiate(self.hparams.optimizer)(params=self.parameters())
        if not self.hparams.scheduler:
            return optimizer
        scheduler = instantiate(self.hparams.scheduler)(optimizer=optimizer)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step", "frequency": 1}}

    def on_fit_start(self) -> None:
        log.info("model: %s parameters", f"{self.model.num_parameters():,}")

    # ---------------------------------------------------------------------------- training
    def _losses(self, batch: dict) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        states, out = self.model.features(batch["src"], batch["tgt_in"]), self.model.output_proj
        return output_layer_loss(states, out.weight, out.bias, batch["tgt_out"], self.hparams.label_smoothing,
                                 self.hparams.pad_id)

    def on_train_batch_start(self, batch: dict, batch_idx: int) -> None:
        self._batch_start = time.perf_counter()

    def _lr(self) -> float:
        return self.trainer.optimizers[0].param_groups[0]["lr"] if self.trainer.optimizers else float("nan")

    def training_step(self, batch: dict, batch_idx: int) -> torch.Tensor | None:
        loss_sum, nll_sum, ntokens = self._losses(batch)
        loss, nll = loss_sum / ntokens, nll_sum / ntokens
        nonfinite = self.trainer.strategy.reduce_boolean_decision(not bool(torch.isfinite(loss)), all=False)
        if nonfinite:  # every rank skips this step together
            self._nonfinite_steps += 1
            step, lr = self.trainer.global_step, self._lr()
            log.warning("train: loss is %s at step %d (lr %.3g): step skipped", loss.item(), step, lr)
            if self._nonfinite_steps >= self.hparams.max_nonfinite_steps:
                raise TrainingDiverged(
                    f"train: loss {loss.item()} at step {step} (lr {lr:.3g}), {self._nonfinite_steps} steps in a "
                    f"row (module.max_nonfinite_steps={self.hparams.max_nonfinite_steps}); training stopped, the "
                    "checkpoints written before are kept"
                )
            return None
        self._nonfinite_steps = 0
        self.log("train/loss", loss, prog_bar=True)
        self.log("train/nll", nll)
        self.log("train/ppl", torch.exp(nll.detach()))
        self.log("train/lr", self.trainer.optimizers[0].param_groups[0]["lr"], prog_bar=True)
        return loss

    def on_train_batch_end(self, outputs, batch: dict, batch_idx: int) -> None:
        seconds = time.perf_counter() - self._batch_start
        tokens = batch["num_tokens"]
        self.train_tokens += tokens
        self.train_seconds += seconds
        self.log("train/tokens_per_sec", tokens / max(seconds, 1e-9))

    def tokens_per_sec(self) -> float:
        """Mean training throughput of this process (source + target tokens, padding excluded)."""
        return self.train_tokens / self.train_seconds if self.train_seconds else 0.0

    # ------------------------------------------------------------------ validation and test
    @torch.no_grad()
    def translate(self, src: torch.Tensor, search=None) -> list[list[tuple[str, float]]]:
        """The n-best (detokenized text, score) of each source row, best first: the one path from
        token ids to the text that validation, test, evaluate and translate score or print.
        Without `search`: the checkpoint's decoding, on the int8 copy with decoding.quantize=int8."""
        model = self.model if search is not None or self.quantize == "none" else self.int8_model()
        hyps = (search or self.search)(model, src, self.hparams.bos_id, self.hparams.eos_id)
        texts = iter(self.tokenizer.tgt.decode([h.tokens for nbest in hyps for h in nbest]))
        return [[(next(texts), h.score) for h in nbest] for nbest in hyps]

    def int8_model(self) -> Transformer:
        """The int8 copy of the model (built once; training and test start rebuild it)."""
        if not self._int8:
            self._int8.append(quantize_int8(self.model))
        return self._int8[0]

    def _eval_step(self, batch: dict, search) -> None:
        loss_sum, nll_sum, ntokens = self._losses(batch)
        self._eval_stats += torch.stack([loss_sum.double(), nll_sum.double(), ntokens.double()])  # stays on the device
        hyps = [nbest[0][0] for nbest in self.translate(batch["src"], search)]
        self._eval_rows.extend(zip(batch["id"].tolist(), batch["src_text"], batch["tgt_text"], hyps))

    def _eval_start(self) -> None:
        self._eval_rows, self._eval_stats = [], torch.zeros(3, dtype=torch.float64, device=self.device)

    def _eval_end(self, stage: str) -> None:
        """Sum loss statistics and gather translations from every rank, then score them once."""
        stats, rows = self._eval_stats, self._eval_rows
        if dist.is_available() and dist.is_initialized():
            dist.all_reduce(stats)
            gathered = [None] * dist.get_world_size()
            dist.all_gather_object(gathered, rows)
            rows = [row for part in gathered for row in part]
        rows = sorted(dict((row[0], row) for row in rows).values())
        loss_sum, nll_sum, ntokens = stats.tolist()
        scores = corpus_scores([r[3] for r in rows], [r[2] for r in rows])
        metrics = {
            f"{stage}/loss": loss_sum / ntokens,
            f"{stage}/nll": nll_sum / ntokens,
            f"{stage}/ppl": math.exp(min(nll_sum / ntokens, 50.0)),
            f"{stage}/bleu": scores["bleu"],
            f"{stage}/chrf": scores["chrf"],
        }
        for name, value in metrics.items():
            self.log(name, value, prog_bar=name.endswith("bleu"), sync_dist=False)
        self.eval_results[stage] = {
            "metrics": metrics,
            "bleu_signature": scores["bleu_signature"],
            "chrf_signature": scores["chrf_signature"],
            "rows": rows,
        }
        if not self.trainer.sanity_checking and self.trainer.is_global_zero:
            loss = metrics[f"{stage}/loss"]
            log.info("%s: BLEU %.2f  chrF %.2f  loss %.3f", stage, scores["bleu"], scores["chrf"], loss)
            for _, src, ref, hyp in rows[: self.hparams.num_samples]:
                log.info("  src: %s\n  ref: %s\n  hyp: %s", src, ref, hyp)

    def on_validation_epoch_start(self) -> None:
        self._eval_start()

    def validation_step(self, batch: dict, batch_idx: int) -> None:
        self._eval_step(batch, self.val_search)

    def on_validation_epoch_end(self) -> None:
        self._eval_end("val")

    def on_test_epoch_start(self) -> None:
        self._int8.clear()  # the weights may have changed since the last copy
        self._eval_start()

    def test_step(self, batch: dict, batch_idx: int) -> None:
        self._eval_step(batch, None)

    def on_test_epoch_end(self) -> None:
        self._eval_end("test")
