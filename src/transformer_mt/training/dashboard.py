"""What the loggers show besides scalar curves, as a Lightning callback: a table of fixed
validation translations and cross-attention heatmaps after every validation, the test
translations and the sacreBLEU signatures at the end, and optionally the best checkpoint as a
wandb artifact. wandb gets tables and images, TensorBoard text and images; the heatmaps of the
last validation are also kept as PNGs in `plot_dir/attention/` (drawn after every validation when
a logger shows them, else once at the end of training).
"""

import logging
import time
from pathlib import Path

import lightning as L
import torch
from lightning.pytorch.callbacks import Callback, ModelCheckpoint
from lightning.pytorch.loggers import Logger, TensorBoardLogger, WandbLogger

from transformer_mt import plots
from transformer_mt.data.batching import Collator
from transformer_mt.evaluation.metrics import sentence_bleu
from transformer_mt.markdown import markdown_table
from transformer_mt.model.maps import attention_maps
from transformer_mt.training.results import ScoredSentence

log = logging.getLogger(__name__)

COLUMNS = ["id", "source", "reference", "hypothesis", "sentence BLEU"]


def table_rows(rows: tuple[ScoredSentence, ...]) -> list[list]:
    """Evaluation rows (id, source, reference, hypothesis) with each hypothesis' sentence BLEU."""
    return [[*row, round(sentence_bleu(row.hypothesis, row.reference), 2)] for row in rows]


def log_table(loggers: list[Logger], key: str, data: list[list], step: int) -> None:
    for logger in loggers:
        if isinstance(logger, WandbLogger):
            logger.log_table(key=key, columns=COLUMNS, data=data, step=step)
        elif isinstance(logger, TensorBoardLogger):
            logger.experiment.add_text(key, markdown_table(COLUMNS, data), global_step=step)


def log_images(loggers: list[Logger], key: str, paths: list[Path], captions: list[str], step: int) -> None:
    """PNG files as images, each under key/caption (their sizes differ); drawn once, read back."""
    import matplotlib.image

    for logger in loggers:
        for path, caption in zip(paths, captions):
            if isinstance(logger, WandbLogger):
                logger.log_image(key=f"{key}/{caption}", images=[str(path)], step=step)
            elif isinstance(logger, TensorBoardLogger):
                pixels = matplotlib.image.imread(path)  # (H, W, RGBA) floats in [0, 1]
                logger.experiment.add_image(f"{key}/{caption}", pixels, global_step=step, dataformats="HWC")


@torch.no_grad()
def cross_attention_maps(model, src: torch.Tensor, tgt_in: torch.Tensor, pad_id: int, layer: int,
                         heads: str) -> list[torch.Tensor]:
    """Cross-attention probabilities of one decoder layer for each sentence of a padded batch, as
    (panels, T, S) with padded target rows and padded source columns cut off; panels = the heads,
    or their mean (heads="mean")."""
    with attention_maps(model) as recorded:
        model.features(src, tgt_in)
    weights = recorded.cross[layer].float().cpu()  # (B, H, T, S)
    # position 0 is the start token, never padding (Marian models start from <pad>)
    src_len, tgt_len = (src != pad_id).sum(1).tolist(), (1 + (tgt_in[:, 1:] != pad_id).sum(1)).tolist()
    maps = [w[:, :t, :s] for w, s, t in zip(weights, src_len, tgt_len)]
    return [m.mean(0, keepdim=True) for m in maps] if heads == "mean" else maps


class TranslationDashboard(Callback):
    """num_sentences: the validation sentences shown after every validation (the first ones of the
    split, the same every time); num_attention: how many of them get a cross-attention heatmap, of
    decoder layer `attention_layer` (python index: -1 = the last), with `attention_heads` = mean (one
    panel) or all (one panel per head); every_n_validations: how often; test_table: the test
    translations as a table at the end; upload_best_checkpoint: best.ckpt as a wandb artifact
    (type model) at the end of training."""

    def __init__(self, plot_dir: str, num_sentences: int = 8, num_attention: int = 2, attention_layer: int = -1,
                 attention_heads: str = "mean", every_n_validations: int = 1, test_table: bool = True,
                 upload_best_checkpoint: bool = False) -> None:
        self.plot_dir = Path(plot_dir)
        self.num_sentences, self.num_attention = num_sentences, min(num_attention, num_sentences)
        self.attention_layer, self.attention_heads = attention_layer, attention_heads
        self.every_n_validations, self.test_table = every_n_validations, test_table
        self.upload_best_checkpoint = upload_best_checkpoint
        self.validations = 0
        self.seconds: list[float] = []  # time spent per validation shown, for the record
        self.heatmaps: list[tuple[str, dict]] = []  # the last validation's, until drawn

    # ------------------------------------------------------------------------------ validation
    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking or not trainer.is_global_zero or "val" not in pl_module.results:
            return
        self.validations += 1
        if (self.validations - 1) % self.every_n_validations:
            return
        started = time.perf_counter()
        rows = pl_module.results["val"].rows[: self.num_sentences]
        log_table(trainer.loggers, "val/translations", table_rows(rows), trainer.global_step)
        if self.num_attention:
            self.heatmaps = self.attention_heatmaps(trainer, pl_module, rows[: self.num_attention])
            if any(isinstance(logger, WandbLogger | TensorBoardLogger) for logger in trainer.loggers):
                self.draw_heatmaps(trainer.loggers, trainer.global_step)
        self.seconds.append(time.perf_counter() - started)
        log.info("dashboard: %d translations and %d heatmaps in %.2f s", len(rows),
                 min(len(rows), self.num_attention), self.seconds[-1])

    def attention_heatmaps(self, trainer: L.Trainer, pl_module: L.LightningModule, rows: tuple[ScoredSentence, ...]
                           ) -> list[tuple[str, dict]]:
        """Decode the sentences again to get the model's own output tokens, and where each output
        token attended in the source: (caption, plots.attention_figure's arguments) per sentence."""
        vocab, m = pl_module.tokenizer, pl_module
        datamodule = getattr(trainer, "datamodule", None)  # the first validation set's tag, as it was scored
        tag = datamodule.prefix(datamodule.eval_sets("val")[0]) if hasattr(datamodule, "eval_sets") else []
        src_ids = vocab.encode_sources([row.source for row in rows], tag)
        collate = Collator(m.pad_id, m.bos_id, m.eos_id)
        src = collate.pad(src_ids).to(pl_module.device)
        was_training = pl_module.model.training
        pl_module.model.eval()
        hyps = [nbest[0].tokens for nbest in m.val_search(m.model, src, m.bos_id, m.eos_id)]
        tgt_in = collate.pad([[m.bos_id, *h] for h in hyps]).to(m.device)
        maps = cross_attention_maps(m.model, src, tgt_in, m.pad_id, self.attention_layer,
                                    self.attention_heads)
        pl_module.model.train(was_training)
        layer = self.attention_layer % pl_module.model.config.num_decoder_layers
        heatmaps = []
        for i, ids, hyp, weights in zip((row.id for row in rows), src_ids, hyps, maps):
            titles = ["mean of heads"] if self.attention_heads == "mean" else [f"head {h}" for h in range(len(weights))]
            heatmaps.append((f"sentence{i}", {
                "weights": weights.numpy(), "src_tokens": vocab.src.tokens(ids),
                "tgt_tokens": vocab.tgt.tokens([*hyp, m.eos_id]), "titles": titles,
                "suptitle": f"sentence {i}, decoder layer {layer}, step {trainer.global_step}"}))
        return heatmaps

    def draw_heatmaps(self, loggers: list[Logger], step: int) -> None:
        """The heatmaps of the last validation as plot_dir/attention/sentence<ID>.png, and as images
        for the loggers that show them (drawing is most of the dashboard's time: with neither wandb
        nor TensorBoard, they are drawn once, at the end)."""
        paths = [self.plot_dir / "attention" / f"{caption}.png" for caption, _ in self.heatmaps]
        for path, (_, arguments) in zip(paths, self.heatmaps):
            plots.save(plots.attention_figure(**arguments), path)
        log_images(loggers, "val/attention", paths, [caption for caption, _ in self.heatmaps], step)
        self.heatmaps = []

    # ----------------------------------------------------------------------------- the end
    def on_test_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        """The test metrics and sacreBLEU signatures in the run's summary, the translations as a table."""
        if not trainer.is_global_zero or "test" not in pl_module.results:
            return
        results = pl_module.results["test"]
        summary = {**results.metrics, "test/bleu_signature": results.bleu_signature,
                   "test/chrf_signature": results.chrf_signature, "test/ter_signature": results.ter_signature}
        for logger in trainer.loggers:
            if isinstance(logger, WandbLogger):
                logger.experiment.summary.update(summary)
            elif isinstance(logger, TensorBoardLogger):
                text = "\n".join(f"- **{k}**: {v:.4g}" if isinstance(v, float) else f"- **{k}**: `{v}`"
                                 for k, v in summary.items())
                logger.experiment.add_text("test/summary", text, global_step=trainer.global_step)
        if self.test_table:
            log_table(trainer.loggers, "test/translations", table_rows(results.rows), trainer.global_step)

    def on_fit_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.heatmaps:  # the last validation's, not drawn yet (no logger shows images)
            self.draw_heatmaps([], trainer.global_step)
        if not (self.upload_best_checkpoint and trainer.is_global_zero):
            return
        best = trainer.checkpoint_callback
        path = best.best_model_path if isinstance(best, ModelCheckpoint) else ""
        for logger in trainer.loggers:
            if isinstance(logger, WandbLogger) and path:
                import wandb

                score = best.best_model_score
                artifact = wandb.Artifact(f"model-{logger.experiment.id}", type="model", metadata={
                    "monitor": best.monitor, "score": None if score is None else float(score),
                    "step": trainer.global_step})
                artifact.add_file(path, name="best.ckpt")
                logger.experiment.log_artifact(artifact, aliases=["best", "latest"])
