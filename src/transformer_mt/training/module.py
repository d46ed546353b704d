"""TranslationModule: the Transformer, its loss, and decode-and-score evaluation.

Built whole from plain hyper-parameters (dicts, numbers, strings), the tokenizer and the decoding
config included, so a checkpoint rebuilds it, also with `weights_only=True`. The training concerns
that are not the model's are Lightning callbacks it configures (`configure_callbacks`): the RNG
state in checkpoints and the throughput meter are the task's (conf/callbacks_always.yaml); the NaN / inf
guard, part of its training step, it configures itself (`configure_callbacks`).
"""

import logging
import math
from pathlib import Path

import lightning as L
import torch
from hydra.utils import instantiate

from transformer_mt.config import plain
from transformer_mt.data.tokenizer import Vocabularies
from transformer_mt.decoding.ensemble import Ensemble
from transformer_mt.decoding.shortlist import Shortlist
from transformer_mt.errors import DataError
from transformer_mt.evaluation.metrics import corpus_scores
from transformer_mt.inference.members import build_transformer, load_members
from transformer_mt.inference.translator import Translator
from transformer_mt.model.kernels import Kernels
from transformer_mt.model.transformer import Runners
from transformer_mt.training.compiled import CompiledStep, compiled_step
from transformer_mt.training.guard import NonFiniteGuard
from transformer_mt.training.loss import output_layer_loss, smoothed_loss
from transformer_mt.training.results import EvalResults, Evaluation, ScoredSentence
from transformer_mt.training.steps import logged_step

log = logging.getLogger(__name__)


class TranslationModule(L.LightningModule):
    """The Lightning module of a run, built from these arguments.

    model: the Transformer's keys (but the vocabulary sizes and pad id: the tokenizer's);
    tokenizer: the vocabularies as plain data (`Vocabularies.to_dict()`), which say the sizes and
    special ids (pad_id, bos_id, eos_id); optimizer / scheduler: `_partial_` Hydra configs;
    decoding: the search of test, evaluate and translate (conf/decoding); val_decoding: the one
    of validation, when cheaper (None = decoding). num_samples: validation translations logged.
    max_nonfinite_steps: training stops after this many NaN / inf steps in a row (skipped).
    data: what the run trained on ({"config", "fingerprints"}), for task=evaluate and resume.
    initial_weights: the Transformer's state_dict to start from (not a hyper-parameter).
    compile: torch.compile the training step's regions (`compiled_step`: one encoder layer, one
    decoder layer, the output layer + loss of one chunk; true: inductor; a string: that
    backend); evaluation stays eager. compile_mode: inductor's mode (reduce-overhead: CUDA graphs);
    shape_grid: data.shape_grid's K (the regions on static shapes, one graph per shape).
    vocab_multiple: the output layer + loss over the vocabulary padded to a multiple of it (the
    same loss and gradients; whole GPU tiles). activation_checkpointing: each layer's activations
    recomputed in the backward pass (Runners.checkpointed). quantize: int8 decodes test, evaluate, translate and
    score with each member's int8 copy of the linear layers (CPU). ensemble: the checkpoints of
    an ensemble's other members (task=evaluate with ckpt_path=[a,b,...]), which share this
    model's vocabularies; they evaluate with it, and are never trained or saved. shortlist: the
    vocabulary shortlist test and evaluate decode over (decoding.shortlist; not a hyper-parameter).
    kernels: the kernels validation, test and evaluate decode on (the key `kernels`, model/kernels.py;
    None: torch's paths; not a hyper-parameter)."""

    def __init__(
        self,
        model: dict,
        tokenizer: dict,
        optimizer: dict,
        decoding: dict,
        scheduler: dict | None = None,
        label_smoothing: float = 0.1,
        val_decoding: dict | None = None,
        num_samples: int = 3,
        max_nonfinite_steps: int = 3,
        data: dict | None = None,
        initial_weights: dict[str, torch.Tensor] | None = None,
        compile: bool | str = False,
        compile_mode: str | None = None,
        shape_grid: int | None = None,
        vocab_multiple: int = 1,
        activation_checkpointing: bool = False,
        quantize: str = "none",
        ensemble: list[str] | None = None,
        shortlist: Shortlist | None = None,
        kernels: Kernels | None = None,
    ) -> None:
        """Every part built once, from the arguments the class docstring describes."""
        super().__init__()
        tokenizer, optimizer, scheduler, data = plain(tokenizer), plain(optimizer), plain(scheduler), plain(data)
        model, decoding, val_decoding = plain(model), plain(decoding), plain(val_decoding)
        # loggers get the run config
        self.save_hyperparameters(ignore=["initial_weights", "ensemble", "shortlist", "kernels"], logger=False)
        self.tokenizer = Vocabularies.from_dict(tokenizer)
        ids = self.tokenizer.special_ids()
        self.pad_id, self.bos_id, self.eos_id = ids["pad_id"], ids["bos_id"], ids["eos_id"]
        self.model = build_transformer(self.tokenizer, model, initial_weights)
        self.search = instantiate(decoding)
        self.val_search = instantiate(val_decoding) if val_decoding else self.search
        self.others = torch.nn.ModuleList(self.ensemble_members(ensemble or []))
        self.translator = Translator([self.model, *self.others], self.tokenizer, self.search, quantize, shortlist,
                                     kernels)
        # the last evaluation of each stage's sets: `val`, `test` (the first set), `val/NAME` (the others)
        self.results: dict[str, EvalResults] = {}
        example = torch.full((1, min(32, self.model.config.max_positions - 1)), self.eos_id)
        self.example_input_array = (example, example)  # the model summary's (forward)
        self.evaluations: dict[int, Evaluation] = {}  # the running one of each set (its dataloader index)
        self.compiled = compiled_step(compile, shape_grid, compile_mode)
        self.guard = NonFiniteGuard(max_nonfinite_steps)

    @property
    def quantize(self) -> str:
        """The int8 rule its Translator decodes with (none | int8)."""
        return self.translator.quantize

    def ensemble_members(self, paths: list[str]) -> list[torch.nn.Module]:
        """The models of an ensemble's other members, which must have this model's vocabularies."""
        if not paths:
            return []
        models, vocabularies, _ = load_members([Path(p) for p in paths])
        if vocabularies.to_dict() != self.tokenizer.to_dict():
            raise DataError(f"ckpt_path: {paths[0]} has other vocabularies than the ensemble's first member; the "
                              "members of an ensemble must share one")
        return models

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        """Teacher-forced logits. Lightning's model summary runs `example_input_array`, one 32-token
        pair, through it to show each layer's sizes and FLOPs (its "Total FLOPs": that pair's forward)."""
        return self.model(src, tgt_in)

    def configure_callbacks(self) -> list[L.Callback]:
        """The module's own part of its training step: the NaN / inf guard, whose decision its
        on_before_optimizer_step makes (after every callback has seen the gradients), with its
        hyper-parameter max_nonfinite_steps. The callbacks the task needs are the task's
        (conf/callbacks_always.yaml)."""
        return [self.guard]

    def configure_optimizers(self):
        optimizer = instantiate(self.hparams.optimizer)(params=self.parameters())
        if not self.hparams.scheduler:
            return optimizer
        scheduler = instantiate(self.hparams.scheduler)(optimizer=optimizer)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step", "frequency": 1}}

    def on_before_optimizer_step(self, optimizer: torch.optim.Optimizer) -> None:
        """Step 4 of the training step (training/steps.py): after every callback has seen the
        gradients (step 3), the NaN / inf guard skips a non-finite step; clipping follows."""
        self.guard.decide(self.trainer, self, optimizer)

    def configure_gradient_clipping(self, optimizer, gradient_clip_val=None, gradient_clip_algorithm=None) -> None:
        """Step 5 of the training step (training/steps.py). Lightning's clipping, except under
        bf16-mixed with a fused optimizer, which Lightning refuses because fp16's loss scaler would
        leave the gradients scaled; bf16 has no scaler, so the gradients are clipped as in fp32
        (without a sync: torch's clip_grad_norm_)."""
        if gradient_clip_val and str(self.trainer.precision) == "bf16-mixed":
            if gradient_clip_algorithm == "value":
                torch.nn.utils.clip_grad_value_(self.parameters(), gradient_clip_val)
            else:
                torch.nn.utils.clip_grad_norm_(self.parameters(), gradient_clip_val)
            return
        self.clip_gradients(optimizer, gradient_clip_val, gradient_clip_algorithm)

    def on_fit_start(self) -> None:
        log.info("model: %s parameters", f"{self.model.num_parameters():,}")

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        if "val" in self.results:  # lets task=average rank epoch checkpoints (best_n)
            checkpoint["val_bleu"] = float(self.results["val"].metrics["val/bleu"])

    # ---------------------------------------------------------------------------- training
    def losses(self, batch: dict, compiled: CompiledStep | None = None
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Label-smoothed loss and NLL summed over the batch's target tokens, and their count, for a
        padded or a packed batch (its `packing`). compiled: the compiled regions; None = eager. An
        ensemble's: of the members' averaged probabilities (their logarithm is its own log-softmax)."""
        if len(self.others):  # the members' averaged log-probabilities, normalized already
            lprobs = Ensemble([self.model, *self.others])(batch["src"], batch["tgt_in"])
            return smoothed_loss(lprobs, batch["tgt_out"], self.hparams.label_smoothing, self.pad_id)
        runners = compiled.runners if compiled else Runners()
        if self.hparams.get("activation_checkpointing") and torch.is_grad_enabled():
            runners = runners.checkpointed()
        states = self.model.features(batch["src"], batch["tgt_in"], batch.get("packing"), runners)
        out = self.model.output_proj
        return output_layer_loss(states, out.weight, out.bias, batch["tgt_out"], self.hparams.label_smoothing,
                                 self.pad_id, chunk_fn=compiled.chunk if compiled else None,
                                 vocab_multiple=self.hparams.vocab_multiple)

    def training_step(self, batch: dict, batch_idx: int) -> torch.Tensor:
        """Step 1 of the training step (training/steps.py): the loss of a batch; its values reach the
        loggers (and the host) only on logging steps."""
        loss_sum, nll_sum, ntokens = self.losses(batch, self.compiled)
        loss, nll = loss_sum / ntokens, nll_sum / ntokens
        if logged_step(self.trainer, self.trainer.global_step + 1):
            self.log("train/loss", loss)  # on the progress bar: training/logging_steps_bar.py
            self.log("train/nll", nll)
            self.log("train/ppl", torch.exp(nll.detach()))
            self.log("train/lr", self.trainer.optimizers[0].param_groups[0]["lr"])
        return loss

    # ------------------------------------------------------------------ validation and test
    def translate(self, src: torch.Tensor, search=None, target_prefix: list[int] = ()) -> list[list[tuple[str, float]]]:
        """The n-best (detokenized text, score) of each source row, best first (`Translator`).
        Without `search`: the checkpoint's decoding, with the int8 rule."""
        return self.translator.translate(src, search, target_prefix)

    def on_train_start(self) -> None:
        self.translator.forget()  # the weights are about to change

    def on_validation_epoch_start(self) -> None:
        self.translator.forget()  # a copy on the chosen kernels holds the weights of its time
        self.start_evaluation()

    def validation_step(self, batch: dict, batch_idx: int, dataloader_idx: int = 0) -> None:
        self.evaluate_batch(batch, self.val_search, dataloader_idx, "val")

    def on_validation_epoch_end(self) -> None:
        self.end_evaluation("val")

    def on_test_epoch_start(self) -> None:
        self.translator.forget()  # the weights may have changed since the copies were made
        self.start_evaluation()

    def test_step(self, batch: dict, batch_idx: int, dataloader_idx: int = 0) -> None:
        self.evaluate_batch(batch, None, dataloader_idx)

    def on_test_epoch_end(self) -> None:
        self.end_evaluation("test")

    def start_evaluation(self) -> None:
        self.evaluations = {}

    def evaluate_batch(self, batch: dict, search, index: int = 0, stage: str = "test") -> None:
        """Add the batch's loss sums (on the device) and its translations to the evaluation of set
        `index` (its dataloader's; each output starts with the set's target tag, as its targets do)."""
        loss_sum, nll_sum, ntokens = self.losses(batch)
        hyps = [nbest[0][0] for nbest in self.translate(batch["src"], search, self.target_prefix(stage, index))]
        evaluation = self.evaluations.setdefault(index, Evaluation(self.device))
        evaluation.add(loss_sum, nll_sum, ntokens,
                       list(map(ScoredSentence, batch["id"].tolist(), batch["src_text"], batch["tgt_text"], hyps)))

    def split_name(self, stage: str) -> str:
        """The split an evaluation scored, for the log: validation's `val`; the test stage's is the
        datamodule's `data.split` (task=evaluate data.split=val logs `val:`, as its metrics.json
        names it)."""
        split = getattr(self.trainer.datamodule, "split", "test") if stage == "test" else stage
        return split if isinstance(split, str) else stage

    def target_prefix(self, stage: str, index: int) -> list[int]:
        """The ids every output of set `index` starts with: its corpus's target tag's (none without a
        datamodule that has them)."""
        datamodule = getattr(self.trainer, "datamodule", None)
        if datamodule is None or not hasattr(datamodule, "target_prefix"):
            return []
        return datamodule.target_prefix(self.names_of_sets(stage)[index])

    def names_of_sets(self, stage: str) -> list[str]:
        """The names of the sets this stage scores, in their dataloaders' order (the datamodule's
        eval_sets; one set without a datamodule)."""
        datamodule = getattr(self.trainer, "datamodule", None)
        if datamodule is None or not hasattr(datamodule, "eval_sets"):
            return ["main"]
        return datamodule.eval_sets(self.split_name(stage) if stage == "test" else stage)

    def end_evaluation(self, stage: str) -> None:
        """For each set in turn (every rank in the same order): sum the loss statistics and gather the
        translations of every rank, then score them once. The first set's metrics are `{stage}/bleu`
        and so on, another's `{stage}/NAME/bleu`."""
        languages = self.target_languages()
        for index, name in enumerate(self.names_of_sets(stage)):
            evaluation = self.evaluations.get(index) or Evaluation(self.device)
            self.score_set(stage if index == 0 else f"{stage}/{name}", evaluation, languages.get(name),
                           tuple(sorted(set(languages.values()))))

    def target_languages(self) -> dict[str, str]:
        """Each corpus's target language (its target_tag's, a language code as __de__ or deu_Latn,
        else its tgt_lang), when the run's corpora have several that the language identifier knows
        (each set is then scored for off-target outputs, `PREFIX/off_target`); else none (one target
        language, or a corpus without one, as the toy's)."""
        corpora = getattr(getattr(self.trainer, "datamodule", None), "corpora", {})
        found = {name: getattr(corpus, "tgt_lang", None) for name, corpus in corpora.items()}
        coded = {name: corpus.target_tag for name, corpus in corpora.items() if getattr(corpus, "target_tag", None)}
        if len(set(coded.values())) < 2 and (None in found.values() or len(set(found.values())) < 2):
            return {}
        from transformer_mt.evaluation.off_target import scored_languages  # py3langid: only a run that needs it

        return scored_languages(found, coded)

    def score_set(self, prefix: str, evaluation: Evaluation, language: str | None = None,
                  languages: tuple[str, ...] = ()) -> None:
        """One set's metrics (`PREFIX/loss` ...), logged, and its results (`self.results[PREFIX]`);
        with its target `language` among the run's `languages`, its off-target rate too."""
        loss_sum, nll_sum, ntokens, rows = evaluation.gathered()
        hypotheses, references = [r.hypothesis for r in rows], [r.reference for r in rows]
        scores = corpus_scores(hypotheses, references)
        metrics = {
            f"{prefix}/loss": loss_sum / ntokens,
            f"{prefix}/nll": nll_sum / ntokens,
            f"{prefix}/ppl": math.exp(min(nll_sum / ntokens, 50.0)),
            f"{prefix}/bleu": scores["bleu"],
            f"{prefix}/chrf": scores["chrf"],
            f"{prefix}/ter": scores["ter"],
        }
        if language is not None:
            from transformer_mt.evaluation.off_target import off_target_rate

            metrics[f"{prefix}/off_target"] = off_target_rate(hypotheses, language, languages)
        for name, value in metrics.items():
            self.log(name, value, prog_bar=name.endswith("bleu"), sync_dist=False)
        self.results[prefix] = EvalResults(metrics, tuple(rows), scores["bleu_signature"], scores["chrf_signature"],
                                           scores["ter_signature"])
        if not self.trainer.sanity_checking and self.trainer.is_global_zero:
            stage, _, name = prefix.partition("/")
            label = self.split_name(stage) + (f"/{name}" if name else "")
            off_target = f"  off-target {metrics[f'{prefix}/off_target']:.1f}%" if language is not None else ""
            log.info("%s: BLEU %.2f  chrF %.2f  TER %.2f  loss %.3f%s", label, scores["bleu"],
                     scores["chrf"], scores["ter"], metrics[f"{prefix}/loss"], off_target)
            for row in rows[: self.hparams.num_samples]:
                log.info("  src: %s\n  ref: %s\n  hyp: %s", row.source, row.reference, row.hypothesis)
