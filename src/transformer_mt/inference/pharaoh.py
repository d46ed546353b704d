"""task.alignment=true: each translation's alignment to its source in Pharaoh format, `i-j` pairs
(source index - output index, 0-based) separated by spaces, in output order.

The links come from the cross-attention (decoding/alignment.py: one link per output subword, to the
source subword one decoder layer attends to most when predicting it, EOS and padding excluded).
task.alignment_unit=words (default) counts the whitespace-separated words of the source line and of
the output line, a word pair linked when any of their subwords are (data/words.py);
task.alignment_unit=subwords counts the model's tokens (the source's without its EOS, the output's
without EOS), as fairseq's --print-alignment does.
"""

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import torch

from transformer_mt.choices import ALIGNMENT_UNITS
from transformer_mt.data.tokenizer import Vocabularies
from transformer_mt.data.words import source_words, token_words
from transformer_mt.decoding.alignment import CrossAttentionAligner
from transformer_mt.validate import check, listing, one_of

Texts = Callable[[list[list[int]], list[int]], list[str]]  # (token sequences, their outputs) -> written texts


@dataclass(frozen=True)
class Alignments:
    """What task.alignment* ask for: the aligner and the unit its indices count."""

    aligner: CrossAttentionAligner
    unit: str = "words"

    @classmethod
    def from_options(cls, options: Mapping, model: torch.nn.Module) -> "Alignments | None":
        """None without task.alignment; else the options, checked against the model (ConfigErrors
        naming the key)."""
        if not options.get("alignment"):
            return None
        unit = options.get("alignment_unit", "words")
        check("task.alignment_unit", unit, one_of(*ALIGNMENT_UNITS), listing(ALIGNMENT_UNITS))
        aligner = CrossAttentionAligner(options.get("alignment_layer", -1), options.get("alignment_heads", "mean"))
        return cls(aligner.check(model.config.num_decoder_layers, model.config.heads), unit)

    def __call__(self, model: torch.nn.Module, tokenizer: Vocabularies, src: torch.Tensor, sources: list[str],
                 outputs: list[list[int]], rows: list[int], texts: Texts) -> list[str]:
        """The Pharaoh line of each output; src (B, S) the padded source ids (with EOS) of a batch,
        `sources` its B cleaned lines, outputs[k] the tokens of an output of source row rows[k], and
        texts(sequences, owners) the written text of first tokens of outputs (where the output's
        words are counted)."""
        ids = tokenizer.special_ids()
        index = torch.tensor(rows, dtype=torch.long, device=src.device)
        links = self.aligner(model, src.index_select(0, index), outputs, ids["bos_id"], ids["eos_id"])
        if self.unit == "subwords":
            return [pharaoh(enumerate(row)) for row in links]
        lengths = (src != ids["pad_id"]).sum(dim=1).tolist()
        src_words = source_words(tokenizer.src, sources, [row[: n - 1] for row, n in zip(src.tolist(), lengths)])
        so_far = iter(texts([out[: k + 1] for out in outputs for k in range(len(out))],
                            [o for o, out in enumerate(outputs) for _ in out]))
        out_words = [token_words([next(so_far) for _ in out]) for out in outputs]
        return [pharaoh((words[j], src_words[row][i]) for j, i in enumerate(row_links))
                for row_links, words, row in zip(links, out_words, rows)]


def pharaoh(links: Iterable[tuple[int, int]]) -> str:
    """`i-j` pairs from (output index j, source index i) links: each once, in output order."""
    return " ".join(f"{i}-{j}" for j, i in sorted(set(links)))
