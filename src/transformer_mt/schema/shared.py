"""Task keys that several tasks share, each declared once: a task's schema inherits the group it
takes (a dataclass base), so that `task.tag` or `task.last_n` means one thing wherever it is."""

from dataclasses import dataclass
from typing import Any

from transformer_mt.choices import ENGINES, TOKENIZED_BLEU
from transformer_mt.schema.keys import key
from transformer_mt.validate import AT_LEAST_1, PATH, integer, listing, one_of, text

TOKENIZED_BLEU_RULE = (one_of(*TOKENIZED_BLEU),
                       "false, true (13a-tokenized, lowercased) or compound (the paper's: tokenized, hyphenated "
                       "compounds split)")


@dataclass
class Scored:
    """A task that reports test BLEU."""

    tokenized_bleu: Any = key(False, "also report BLEU on 13a-tokenized, lowercased text (true; as older papers did, "
                                     "not sacreBLEU's) or the paper's (compound: hyphenated compounds split)",
                              TOKENIZED_BLEU_RULE)


@dataclass
class Trained(Scored):
    """A task that trains a model (task=train, and the training stages of distill and backtranslate)."""

    last_n: Any = key(0, "> 0: at the end, average the weights of the last N epoch checkpoints "
                         "(callbacks.epoch_checkpoint) into checkpoints/average.ckpt and test that one instead of "
                         "best.ckpt", (integer(0), "an integer >= 0 (0: no averaging)"))


@dataclass
class Tagged:
    """A task whose model reads sources of tagged training corpora."""

    tag: Any = key(None, "a tag of the training corpora (e.g. bt: the token <bt>), put before every source the "
                         "model reads, as training did", (text, "a tag name (bt or <bt>)"), nullable=True)


@dataclass
class Languaged(Tagged):
    """A task that names the languages of a multilingual model (M2M-100, NLLB-200: their codes)."""

    source_lang: Any = key(None, "the source language's code as the model's vocabulary has it (__en__, eng_Latn), put "
                                 "before every source (as task.tag; set one of the two)", (text, "a language code"),
                           nullable=True)
    target_lang: Any = key(None, "the target language's code (__de__, deu_Latn): every output starts with it, as "
                                 "generate's forced_bos_token_id (counted 0 in the score)", (text, "a language code"),
                           nullable=True)


@dataclass
class Batched:
    """A task whose model translates or scores in batches."""

    max_tokens: Any = key(4096, "token budget of a batch the model translates or scores (padded)",
                          AT_LEAST_1)


@dataclass
class Engined(Batched):
    """A task whose model translates: by our searches or by CTranslate2."""

    engine: Any = key("ours", "ours: transformer_mt's searches | ctranslate2: CTranslate2 decodes the checkpoint, "
                              "converted once into the folder task.ct2_dir says (one checkpoint, not an ensemble; "
                              "no task.alignment; decoding's PowerLength only); with quantize=int8 its int8 weights",
                      (one_of(*ENGINES), listing(ENGINES)))
    ct2_dir: Any = key(None, "where task.engine=ctranslate2 keeps the converted model (a folder per checkpoint digest "
                             "and quantization) | null: ct2/ beside the checkpoint when that folder is writable and "
                             "not inside a git work tree, else the user cache $TRANSFORMER_MT_CACHE/ct2 or "
                             "~/.cache/transformer_mt/ct2", PATH, nullable=True)


@dataclass
class Chunked(Engined):
    """A pipeline whose model writes a synthetic corpus, in chunks that a rerun resumes."""

    chunk_lines: Any = key(10000, "the synthetic corpus is written (and resumed) this many lines at a time; with "
                                  "trainer.devices N > 1, device k translates chunks k, k + N, ...",
                           AT_LEAST_1)
