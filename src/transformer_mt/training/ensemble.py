"""task=evaluate of an ensemble (ckpt_path=[a.ckpt,b.ckpt,...]): the first member's module (its
tokenizer, decoding and data record) evaluating with every member's model: the loss of the
members' averaged probabilities and the ensemble's translations (decoding/ensemble.py)."""

import torch
from torch import nn

from transformer_mt.decoding.ensemble import Ensemble
from transformer_mt.errors import ConfigError
from transformer_mt.model import Transformer
from transformer_mt.training.loss import label_smoothed_nll_loss
from transformer_mt.training.module import TranslationModule


class EnsembleModule(TranslationModule):
    """A TranslationModule (the first member's arguments) whose evaluation runs the ensemble of its
    model and `others`. For evaluation only: it is never trained or saved."""

    def __init__(self, others: list[Transformer], **first) -> None:
        super().__init__(**first)
        if self.quantize == "int8":
            raise ConfigError("quantize=int8 decodes one checkpoint; an ensemble decodes its members as they are")
        self.others = nn.ModuleList(others)

    def ensemble(self) -> Ensemble:
        return Ensemble([self.model, *self.others])

    def losses(self, batch: dict, compiled=None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The label-smoothed loss and NLL of the members' averaged probabilities (their logarithm
        is its own log-softmax), summed over the batch's target tokens, and their count."""
        lprobs = self.ensemble()(batch["src"], batch["tgt_in"])
        return label_smoothed_nll_loss(lprobs, batch["tgt_out"], self.hparams.label_smoothing, self.pad_id)

    @torch.no_grad()
    def translate(self, src: torch.Tensor, search=None) -> list[list[tuple[str, float]]]:
        """TranslationModule.translate with the ensemble searched."""
        hyps = (search or self.search)(self.ensemble(), src, self.bos_id, self.eos_id)
        texts = iter(self.tokenizer.tgt.decode([h.tokens for nbest in hyps for h in nbest]))
        return [[(next(texts), h.score) for h in nbest] for nbest in hyps]
