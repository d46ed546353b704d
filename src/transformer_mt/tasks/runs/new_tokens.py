"""model.new_tokens: tokens added to an imported model's vocabulary before it is fine-tuned, as a
new language's code (NLLB-200 lacks kas_Deva's cousin, M2M-100 a hundred languages): each is one
more row of the embeddings and the output layer, initialised to the mean of the rows of the
vocabulary's language codes (its tags but the `<unusedN>` rows no token has; of all its rows where
it has none), so that it starts as "some
language" and training on its corpus (data.corpora.NAME.tag / target_tag naming it) makes it its
own. The mean of related rows is what eole and Hugging Face's resize_token_embeddings start from."""

import re

import torch

from transformer_mt.data.tokenizer import MarianVocabulary, Vocabularies, tag_token
from transformer_mt.validate import Refusal, refuse

UNUSED = re.compile(r"<unused\d+>")  # the rows an imported model has no token for (interop/m2m100.py)
ROWS = ("src_embed.weight", "tgt_embed.weight", "output_proj.weight", "output_proj.bias")  # one row per token


def with_new_tokens(vocabularies: Vocabularies, weights: dict[str, torch.Tensor], tokens: list[str]
                    ) -> tuple[Vocabularies, dict[str, torch.Tensor]]:
    """The vocabularies with `tokens` after their pieces (tags: dropped when decoding) and the
    weights with a row for each; none: both as they are. A vocabulary that is not an imported
    one (one sentencepiece list for both sides), or a token it has, is a ConfigError naming the key."""
    if not tokens:
        return vocabularies, weights
    refuse(new_tokens_refusal(vocabularies, tokens))
    vocab = vocabularies.src
    size = vocab.vocab_size
    codes = [vocab.ids[tag] for tag in vocab.tag_tokens() if not UNUSED.fullmatch(tag)] or list(range(size))
    grown = MarianVocabulary(vocab.proto, [*vocab.pieces, *tokens], vocab.start, [*vocab.added, *tokens])
    out = dict(weights)
    for name in ROWS:
        if name in weights and weights[name].size(0) == size:
            mean = weights[name][codes].float().mean(dim=0, keepdim=True).to(weights[name].dtype)
            out[name] = torch.cat([weights[name], mean.expand(len(tokens), *mean.shape[1:])])
    return Vocabularies(grown), out


def new_tokens_refusal(vocabularies: Vocabularies, tokens: list[str]) -> Refusal:
    """Why `tokens` cannot be added: a vocabulary that is not an imported one (one sentencepiece
    list for both sides), a token that is no tag word, or one it has (or named twice)."""
    vocab = vocabularies.src
    if not vocabularies.joint or not isinstance(vocab, MarianVocabulary):
        return ("model.new_tokens: adds tokens to an imported Hugging Face model's vocabulary (Marian, M2M-100, "
                "NLLB-200); this one's tags come from data.corpora.NAME.tag when it is trained")
    for i, token in enumerate(tokens):
        tag_token(token, "model.new_tokens")  # one word, not a special token's name
        if token in vocab.ids or token in tokens[:i]:
            return f"model.new_tokens: {token} is in the vocabulary already (or named twice)"
    return None
