"""The `data` group (conf/data/*.yaml): data/datamodule.py's TranslationDataModule, its keys and the
tokenizer's (data/tokenizer.py's TokenizerOptions), which every preset shares (conf/data_shared.yaml
extends DataNode), and data=checkpoint's (task=evaluate's default: the checkpoint's own data). The
corpora under data.corpora are constructor calls of their own, checked by their classes."""

from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig

from transformer_mt.choices import SPLITS
from transformer_mt.schema.keys import Group, key
from transformer_mt.validate import (
    AT_LEAST_0,
    AT_LEAST_1,
    BOOLEAN,
    PROBABILITY,
    Refusal,
    integer,
    listing,
    number,
    one_of,
    text,
)

SMALLEST_VOCABULARY = 5  # the four special tokens and one more
PATH_OR_NULL = (text, "a path")


@dataclass
class TokenizerNode(Group):
    """How the vocabularies are made: trained on the training split, or read from files."""

    _target_: Any = key("transformer_mt.data.TokenizerOptions", "the options' class")
    type: Any = key("bpe", "bpe (Hugging Face tokenizers) | sentencepiece", (one_of("bpe", "sentencepiece"),
                                                                             "bpe or sentencepiece"))
    model_type: Any = key("unigram", "sentencepiece's model: unigram | bpe", (one_of("unigram", "bpe"),
                                                                               "unigram or bpe"))
    joint: Any = key(True, "one vocabulary for both sides (false: one per side, then model.tie_embeddings=decoder)",
                     BOOLEAN)
    vocab_size: Any = key(8000, "tokens per vocabulary", (integer(SMALLEST_VOCABULARY),
                                                          f"an integer >= {SMALLEST_VOCABULARY}"))
    min_frequency: Any = key(2, "bpe: the fewest occurrences of a merged pair", AT_LEAST_0)
    character_coverage: Any = key(1.0, "sentencepiece: the share of characters covered",
                                  (number(0.0, 1.0, low_open=True), "a number in (0, 1]"))
    lowercase: Any = key(False, "lowercase the text before tokenizing", BOOLEAN)
    normalization: Any = key("nfkc", "Unicode normalization: nfkc | none", (one_of("nfkc", "none"), "nfkc or none"))
    file: Any = key(None, "a tokenizers .json or sentencepiece .model to use instead of training", PATH_OR_NULL,
                    nullable=True)
    tgt_file: Any = key(None, "with joint=false and file: the target side's", PATH_OR_NULL, nullable=True)
    train_sample: Any = key(750000, "trained on a fixed-seed sample of this many training pairs (null: all); 750,000 "
                                    "keeps the BPE trainer under 2 GB on news-like text", AT_LEAST_1, nullable=True)
    dropout: Any = key(0.0, "subword regularization of the training split, drawn again every epoch (bpe: "
                            "BPE-dropout's probability; sentencepiece: its sampling alpha)", PROBABILITY)

    @staticmethod
    def refusal(node: DictConfig, prefix: str) -> Refusal:
        """A target side's own file goes with separate vocabularies, and separate vocabularies from
        files need both."""
        if node.tgt_file and node.joint:
            return f"{prefix}tgt_file={node.tgt_file!r}: needs {prefix}joint=false"
        if node.file and not node.joint and not node.tgt_file:
            return f"{prefix}joint=false with {prefix}file also needs {prefix}tgt_file"
        return None


@dataclass
class ReadingNode(Group):
    """What every data option takes: how this machine reads, encodes and batches the data (a checkpoint's
    own data too: these keys are this command's, never the training machine's)."""

    cache_dir: Any = key("${paths.cache_dir}", "where token ids and vocabularies are cached", PATH_OR_NULL)
    run_dir: Any = key("${paths.output_dir}", "the run's folder (it keeps a copy of the vocabularies)", PATH_OR_NULL,
                       nullable=True)
    num_workers: Any = key(0, "DataLoader worker processes per process", AT_LEAST_0)
    num_proc: Any = key(1, "processes encoding the corpus when the cache is built", AT_LEAST_1)
    pad_to_multiple: Any = key(1, "batch lengths padded up to a multiple of this (8: tensor-core shapes); the "
                                  "token budgets count the padded lengths", AT_LEAST_1)
    progress: Any = key("${progress}", "bars while the corpus is read, the tokenizer trained and the splits encoded")


@dataclass
class DataNode(ReadingNode):
    """The data every preset shares (data=toy, multi30k, files, ...): its corpora, the vocabularies, the batches."""

    _target_: Any = key("transformer_mt.data.TranslationDataModule", "the datamodule's class")
    corpora: Any = key({}, "the run's corpora by name, in order, the first the run's own (validated and tested); "
                           "each a corpus node (_target_: its class) with weight (pairs shown per epoch: 1 once, 0 "
                           "none) and tag (a token put before its sources); null leaves one out")
    temperature: Any = key(None, "each training corpus's share of an epoch ∝ (weight x pairs)^(1/T); null: the "
                                 "weights as they are", (number(0.0, low_open=True), "a number > 0"), nullable=True)
    tokenizer: Any = key(TokenizerNode(), "how the vocabularies are made (data.tokenizer.*)")
    max_tokens: Any = key(4096, "padded tokens per training batch", AT_LEAST_1)
    eval_max_tokens: Any = key(8192, "padded tokens per validation and test batch (null: max_tokens)", AT_LEAST_1,
                               nullable=True)
    max_len: Any = key(256, "training pairs with a longer side are removed (counted); val / test never are",
                       AT_LEAST_1)
    max_len_ratio: Any = key(None, "e.g. 3.0: training pairs whose longer side exceeds 3 x the shorter are removed",
                             (number(1.0), "a number >= 1"), nullable=True)
    split: Any = key("test", "the split that test (and task=evaluate) scores", (one_of(*SPLITS), listing(SPLITS)))
    seed: Any = key("${seed}", "the data order's seed (the run's)")
    packed: Any = key(False, "training batches packed end to end with no padding (attention per sentence)", BOOLEAN)
    shape_grid: Any = key(None, "K: training batches of at most K shapes fitted to the corpus (compiled steps on "
                                "fixed shapes); null: each batch its own", AT_LEAST_1, nullable=True)

    @staticmethod
    def refusal(node: DictConfig, prefix: str) -> Refusal:
        """A shape grid bounds padded batches whose lengths are fixed once."""
        if node.shape_grid and node.packed:
            return f"{prefix}shape_grid with {prefix}packed=true: packed batches have no padded shape to bound"
        if node.shape_grid and node.tokenizer.dropout > 0:
            return (f"{prefix}shape_grid with {prefix}tokenizer.dropout: the lengths change every epoch, so no grid "
                    "fitted once holds them; set one of the two")
        return None


@dataclass
class CheckpointDataNode(ReadingNode):
    """data=checkpoint (task=evaluate's default): the data the checkpoint was trained on, as it records it."""

    from_checkpoint: Any = key(True, "the data is the checkpoint's own", BOOLEAN)
    split: Any = key(None, "the split scored (null: the checkpoint's: test, unless trained otherwise)",
                     (one_of(*SPLITS), listing(SPLITS)), nullable=True)
    eval_max_tokens: Any = key(None, "padded tokens per batch (null: the checkpoint's)", AT_LEAST_1, nullable=True)


DATA = {"data_shared": DataNode, "checkpoint": CheckpointDataNode}
