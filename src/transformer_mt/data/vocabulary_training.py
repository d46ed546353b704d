"""Training the vocabularies of a run: BPE with `tokenizers` or sentencepiece, on the training text
(an iterator: never copied), or loading the files the user gives (data.tokenizer.file)."""

import io
import itertools
import logging
import os
import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import sentencepiece as spm
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

from transformer_mt.atomic import atomic_dir
from transformer_mt.data.corpus import ParallelText
from transformer_mt.data.tokenizer import (
    BOS,
    EOS,
    PAD,
    SPECIAL_TOKENS,
    UNK,
    BpeTokenizer,
    SentencePieceTokenizer,
    TextTokenizer,
    TokenizerOptions,
    Vocabularies,
)
from transformer_mt.errors import ConfigError, DataError
from transformer_mt.progress import ProgressBar

log = logging.getLogger(__name__)


def train_bpe(lines: Iterable[str], options: TokenizerOptions, extra: list[str] = ()) -> TextTokenizer:
    """BPE with `tokenizers`: NFKC (optional), whitespace rule, Metaspace + punctuation splits;
    `extra` tokens (tags) are special tokens: whole, never merged, dropped when decoding."""
    tokenizer = Tokenizer(models.BPE(unk_token=UNK))
    steps = [normalizers.NFKC()] if options.normalization == "nfkc" else []
    steps += [normalizers.Replace(Regex(r"\s+"), " "), normalizers.Strip()]
    if options.lowercase:
        steps.append(normalizers.Lowercase())
    tokenizer.normalizer = normalizers.Sequence(steps)
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Metaspace(), pre_tokenizers.Punctuation()])
    tokenizer.decoder = decoders.Metaspace()
    trainer = trainers.BpeTrainer(vocab_size=options.vocab_size, min_frequency=options.min_frequency,
                                  special_tokens=[*SPECIAL_TOKENS, *extra], show_progress=False)
    tokenizer.train_from_iterator(lines, trainer=trainer)
    return warn_about_size(BpeTokenizer(tokenizer), options.vocab_size)


def train_sentencepiece(lines: Iterable[str], options: TokenizerOptions, extra: list[str] = ()) -> TextTokenizer:
    """sentencepiece (unigram or BPE) with ids 0-3 = <pad>, <s>, </s>, <unk>; `extra` tokens (tags)
    are control symbols: whole, never in a segmentation of text, dropped when decoding."""
    rule = {"nfkc": "nmt_nfkc", "none": "identity"}[options.normalization]
    if options.lowercase:
        rule = {"nmt_nfkc": "nmt_nfkc_cf", "identity": "nfkc_cf"}[rule]
    model = io.BytesIO()
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(line for line in lines if line), model_writer=model,
            vocab_size=options.vocab_size, model_type=options.model_type,
            character_coverage=options.character_coverage, normalization_rule_name=rule,
            pad_id=0, bos_id=1, eos_id=2, unk_id=3, pad_piece=PAD, bos_piece=BOS, eos_piece=EOS, unk_piece=UNK,
            hard_vocab_limit=False, input_sentence_size=2_000_000, shuffle_input_sentence=True,
            **({"control_symbols": list(extra)} if extra else {}),
            num_threads=os.cpu_count() or 1, minloglevel=2,
        )
    except RuntimeError as err:
        raise sentencepiece_config_error(err, options.vocab_size) from None
    processor = spm.SentencePieceProcessor(model_proto=model.getvalue())
    return warn_about_size(SentencePieceTokenizer(processor), options.vocab_size)


def sentencepiece_config_error(err: RuntimeError, asked: int) -> Exception:
    """A ConfigError naming data.tokenizer.vocab_size when sentencepiece rejects the size; else `err`."""
    message = str(err)
    if "Vocabulary size" not in message:
        return err
    needed = re.search(r"required_chars\. \d+ vs (\d+)", message)
    at_least = f": the corpus's characters and the special tokens need at least {needed[1]}" if needed else ""
    return ConfigError(f"data.tokenizer.vocab_size={asked} is rejected by sentencepiece{at_least} "
                       f"(raise it, or lower data.tokenizer.character_coverage)")


def warn_about_size(tokenizer: TextTokenizer, asked: int) -> TextTokenizer:
    """Warn when the trained vocabulary is smaller or larger than data.tokenizer.vocab_size."""
    got = tokenizer.vocab_size
    if got < asked:
        log.warning("vocabulary has %d tokens, fewer than the %d asked for (data.tokenizer.vocab_size): "
                    "the corpus is too small for more", got, asked)
    elif got > asked:
        log.warning("data.tokenizer.vocab_size=%d, but the vocabulary has %d tokens: the trainer keeps every "
                    "character of the corpus (and the special tokens) whatever the size asked for", asked, got)
    return tokenizer


def build_vocabularies(src_lines: Iterable[str], tgt_lines: Iterable[str], options: TokenizerOptions,
                       tags: list[str] = (), target_tags: list[str] = ()) -> Vocabularies:
    """Load the user's files, or train one joint or two separate vocabularies on training text (the
    source's, or the joint one, with `tags` as whole tokens; the target's, or the joint one, with
    `target_tags`)."""
    if options.file:
        src = TextTokenizer.load(options.file)
        if options.joint:
            return Vocabularies(src)
        return Vocabularies(src, TextTokenizer.load(options.tgt_file))
    train = train_bpe if options.type == "bpe" else train_sentencepiece
    if options.joint:
        joint = list(dict.fromkeys([*tags, *target_tags]))
        return Vocabularies(train(itertools.chain(src_lines, tgt_lines), options, joint))  # an iterator: no copy
    return Vocabularies(train(src_lines, options, tags), train(tgt_lines, options, target_tags))



def drained(lines: list[str]) -> Iterator[str]:
    """The lines of `lines`, each let go of by the list as it is handed on: a trainer counts words
    as it reads, so the text is gone before its largest tables are built (at WMT size a million
    pairs of text, ~0.5 GB, no longer held at the peak)."""
    for i, line in enumerate(lines):
        lines[i] = None
        yield line


def check_file_matches(options: TokenizerOptions, vocab: Vocabularies) -> None:
    """Given vocabularies (a checkpoint's) and a tokenizer file in the config must agree."""
    if not options.file:
        return
    from_file = build_vocabularies([], [], options)
    if not from_file.same_as(vocab):
        raise DataError(
            f"data.tokenizer.file={options.file}: its vocabulary ({from_file.src.vocab_size} tokens) "
            f"is not the checkpoint's ({vocab.src.vocab_size} tokens); leave data.tokenizer.file unset "
            "to use the checkpoint's"
        )


def cached_vocabularies(folder: Path, options: TokenizerOptions, training_sample: Callable[[], ParallelText],
                        tags: list[str], progress: bool | None, target_tags: list[str] = ()) -> Vocabularies:
    """The vocabularies in the cache entry `folder`, made first when it is missing: read from the
    file of `options`, or trained on `training_sample()` with `tags` and `target_tags` as whole tokens."""
    if not folder.is_dir():
        train = ParallelText([], []) if options.file else training_sample()
        with ProgressBar("training the tokenizer", None, "", progress):
            vocab = build_vocabularies(drained(train.src), drained(train.tgt), options, tags, target_tags)
        del train
        with atomic_dir(folder) as tmp:
            vocab.save(tmp)
    return Vocabularies.load(folder)
