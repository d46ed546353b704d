"""The one path from a model to hypotheses: validation, test, task=evaluate, translate, score and the
pipelines' synthetic stage all go through a Translator.

A Translator holds the models (one checkpoint's, or an ensemble's members: decoding/ensemble.py
searches them as one), the int8 rule (quantize=int8: each member's int8 copy decodes), the search
and the tokenizer. It gives hypotheses, texts, and teacher-forced log-probabilities; the tasks only
batch, format and write. Where the search's options ask for it (`SearchOptions.static`: by default
on a GPU), one model decodes through its compiled step on static shapes (model/static_step.py),
made once and kept; an ensemble decodes as it is. With a vocabulary shortlist (decoding.shortlist:
the checkpoint's lexical table, decoding/shortlist.py) every batch's output layer holds only the
batch's candidates, in every member, fp32 or int8 (not on the static step); teacher-forced
log-probabilities (task=score) stay over the whole vocabulary.
"""

from copy import copy as shallow_copy

import torch
from torch import nn

from transformer_mt.data.tokenizer import Vocabularies
from transformer_mt.decoding.constraints import Phrase
from transformer_mt.decoding.ensemble import Ensemble
from transformer_mt.decoding.search import Hypothesis
from transformer_mt.decoding.shortlist import Shortlist, forced_ids, shortlisted_search
from transformer_mt.decoding.strategy import Search
from transformer_mt.inference.engine import Engine, EngineCapabilities
from transformer_mt.model import Transformer
from transformer_mt.model.kernels import Kernels
from transformer_mt.model.quantize import DecodingCopies
from transformer_mt.model.static_step import StaticDecoder


class Translator(Engine):
    """Token ids in, hypotheses, texts or log-probabilities out, for `models` (one, or an ensemble's
    members sharing `tokenizer`) and `search`; with quantize="int8", every member's int8 copy decodes;
    with a `shortlist`, each batch over its candidates only; with `kernels` (model/kernels.py), the
    linear layers on the kernels chosen for this CPU (None: torch's). task.engine=ours (engine.py)."""

    capabilities = EngineCapabilities(ensembles=True, alignments=True, constraints=True, any_length_norm=True)

    def __init__(self, models: list[nn.Module], tokenizer: Vocabularies, search: Search | None, quantize: str = "none",
                 shortlist: Shortlist | None = None, kernels: Kernels | None = None) -> None:
        self.models, self.tokenizer, self.search, self.shortlist = models, tokenizer, search, shortlist
        self.kernels = kernels
        self.quantize = quantize  # one of choices.QUANTIZE (the schema's `quantize`)
        self.copies = [DecodingCopies(model, kernels) for model in models]
        self.static: dict[int, StaticDecoder] = {}  # of each model that decodes so, by id
        ids = tokenizer.special_ids()
        self.pad_id, self.bos_id, self.eos_id = ids["pad_id"], ids["bos_id"], ids["eos_id"]

    @property
    def device(self) -> torch.device:
        return next(self.models[0].parameters()).device

    @property
    def max_positions(self) -> int:
        """The longest sequence every member takes (an ensemble's: its members' shortest)."""
        return min(model.config.max_positions for model in self.models)

    def to(self, device: torch.device | str) -> "Translator":
        """The models moved to `device` (int8 copies made again when asked for); itself."""
        for model in self.models:
            model.to(device)
        if self.shortlist is not None:
            self.shortlist.to(device)
        self.forget()
        return self

    def with_search(self, search: Search) -> "Translator":
        """A Translator of the same models, int8 copies and compiled steps (shared, not copied) that
        decodes with `search` (a server's request options)."""
        other = shallow_copy(self)
        other.search = search
        return other

    def members(self, quantized: bool | None = None) -> list[nn.Module]:
        """The models that decode: their int8 copies with quantize=int8 (or quantized=True), else
        the models on their chosen kernels (model/kernels.py; the models themselves without)."""
        int8 = self.quantize == "int8" if quantized is None else quantized
        return [copy.int8() if int8 else copy.fp32() for copy in self.copies]

    def prepared(self) -> str:
        """The models that decode made now (int8 copies, copies on the chosen kernels: the kernels
        measured where they were not before), and the kernels in words, for the log."""
        self.members()
        return "kernels: torch's paths" if self.kernels is None else self.kernels.describe()

    def model(self, quantized: bool | None = None):
        """What a search runs, and forced decoding scores with: the one model, or the members'
        Ensemble (its forward gives log-probabilities)."""
        members = self.members(quantized)
        return members[0] if len(members) == 1 else Ensemble(members)

    def forget(self) -> None:
        """The weights changed (training, a checkpoint loaded, a move): the decoding copies (int8, on
        kernels) are made again when asked for."""
        for copy in self.copies:
            copy.forget()
        self.static.clear()

    def searched(self, model, search: Search):
        """What `search` runs: `model`, or where its options ask for the static step and `model` is
        one Transformer, its StaticDecoder (CUDA graphs on a GPU)."""
        if not isinstance(model, Transformer) or not search.options.static(self.device):
            return model
        if id(model) not in self.static:
            mode = "reduce-overhead" if self.device.type == "cuda" else None
            self.static[id(model)] = StaticDecoder(model, mode=mode)
        return self.static[id(model)]

    @torch.no_grad()
    def hypotheses(self, src: torch.Tensor, search: Search | None = None, prefix_tokens: torch.Tensor | None = None,
                   constraints: list[list[Phrase]] | None = None, free_prefix: int = 0) -> list[list[Hypothesis]]:
        """The n-best hypotheses of each row of src (B, S), best first. search: None, the
        translator's (with the int8 rule); another (validation's), on the float models.
        `constraints`: each row's phrases of target ids (beam search with decoding.constraints). With
        a shortlist, over the batch's rows of it (decoding/shortlist.py)."""
        quantized = None if search is None else False
        search = search or self.search
        if self.shortlist is not None:
            rows = self.shortlist.rows(src, forced_ids(prefix_tokens, constraints, src.device))
            return shortlisted_search(search, self.members(quantized), rows, src, self.bos_id, self.eos_id,
                                      prefix_tokens, constraints, free_prefix)
        model = self.model(quantized)
        return search(self.searched(model, search), src, self.bos_id, self.eos_id, prefix_tokens, constraints,
                      free_prefix)

    def translate(self, src: torch.Tensor, search: Search | None = None, target_prefix: list[int] = ()
                  ) -> list[list[tuple[str, float]]]:
        """The n-best (detokenized text, score) of each source row, best first; every output starts
        with `target_prefix` (a target language's code, counted 0; dropped from the text)."""
        forced = None
        if target_prefix:
            forced = torch.tensor([list(target_prefix)], device=src.device).expand(src.size(0), -1)
        hyps = self.hypotheses(src, search, forced, free_prefix=len(target_prefix))
        texts = iter(self.tokenizer.tgt.decode([h.tokens for nbest in hyps for h in nbest]))
        return [[(next(texts), h.score) for h in nbest] for nbest in hyps]

    @torch.no_grad()
    def log_probs(self, src: torch.Tensor, tgt_in: torch.Tensor, quantized: bool | None = None) -> torch.Tensor:
        """Teacher-forced log-probabilities (B, T, V), fp32, of the model that decodes (the int8 rule,
        or `quantized`): one model's log-softmax of its logits, an ensemble's averaged ones as it
        gives them (normalized already)."""
        model = self.model(quantized)
        out = model(src, tgt_in)
        return out if model.normalized else out.float().log_softmax(dim=-1)
