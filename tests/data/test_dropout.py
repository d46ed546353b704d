"""Subword regularization in the data path (data.tokenizer.dropout, data/dropout.py): BPE-dropout
(merged tokens split back along the merge tree) or sentencepiece's sampling, re-drawn every epoch
from (seed, epoch), the same in every worker and on a rerun; validation, test and the cache keep the
deterministic ids."""

import numpy as np
import pytest
import torch

from tests.helpers import schema_refusal
from transformer_mt.data import TranslationDataModule
from transformer_mt.data.dropout import MergeDropout, PieceSampling, Sequences, merge_children, resegmenter
from transformer_mt.data.tokenizer import MarianVocabulary, TokenizerOptions
from transformer_mt.data.toy import ToyCorpus
from transformer_mt.errors import ConfigError

VOCAB = {"a": 0, "b": 1, "c": 2, "ab": 3, "abc": 4, "</s>": 5}
CHILDREN = merge_children(VOCAB, [["a", "b"], "ab c"])  # both merge spellings of tokenizers' JSON


def test_the_merge_table_and_a_split_by_hand():
    assert CHILDREN.tolist() == [[-1, -1], [-1, -1], [-1, -1], [0, 1], [3, 2], [-1, -1]]
    always = MergeDropout(CHILDREN, 0.999999)  # every node dropped: down to the characters, EOS kept
    out = always(Sequences(np.array([4, 5, 3, 2, 5]), np.array([2, 3])), np.array([0, 1]), key=1)
    assert out.ids.tolist() == [0, 1, 2, 5, 0, 1, 2, 5] and out.lengths.tolist() == [4, 4]
    never = MergeDropout(CHILDREN, 0.0)
    seqs = Sequences(np.array([4, 5]), np.array([2]))
    assert never(seqs, np.array([0]), key=1).ids.tolist() == [4, 5]


def test_each_node_is_dropped_once_with_probability_p():
    """abc splits with p, then ab with p: 1 + p + p^2 tokens on average (not redrawn at every depth)."""
    n, p = 40_000, 0.3
    out = MergeDropout(CHILDREN, p)(Sequences(np.full(n, 4), np.ones(n, dtype=np.int64)), np.arange(n), key=7)
    assert out.lengths.mean() == pytest.approx(1 + p + p * p, abs=0.01)


def test_a_row_is_segmented_by_its_index_and_key_alone():
    dropout = MergeDropout(CHILDREN, 0.5)
    rows = Sequences(np.array([4, 4, 3, 5, 4, 3, 4, 5]), np.array([4, 4]))
    together = dropout(rows, np.array([10, 11]), key=3)
    alone = dropout(Sequences(np.array([4, 3, 4, 5]), np.array([4])), np.array([11]), key=3)
    assert together.ids[together.lengths[0]:].tolist() == alone.ids.tolist()
    keys = {tuple(dropout(rows, np.array([10, 11]), key=k).ids.tolist()) for k in range(8)}
    assert len(keys) > 1  # another key (epoch), another segmentation


def datamodule(tmp_path, dropout: float, seed: int = 1, tokenizer: dict | None = None, corpora: dict | None = None,
               **options) -> TranslationDataModule:
    """The toy corpus's datamodule (and `corpora` after it), prepared and set up for fit."""
    dm = TranslationDataModule({"toy": ToyCorpus(num_train=400, num_val=10, num_test=10), **(corpora or {})},
                               TokenizerOptions(**{"vocab_size": 300, **(tokenizer or {})}, dropout=dropout),
                               cache_dir=str(tmp_path / "cache"), max_tokens=400, seed=seed, **options)
    dm.prepare_data()
    dm.setup("fit")
    return dm


def epoch_rows(dm: TranslationDataModule, epoch: int) -> dict[int, tuple[list[int], list[int]]]:
    """Every training pair the loader gives in `epoch`: id -> (source ids, target ids)."""
    loader = dm.train_dataloader()
    loader.batch_sampler.sampler.set_epoch(epoch)
    rows = {}
    for batch in loader:
        for i, row in enumerate(batch["id"].tolist()):
            src, tgt = batch["src"][i], batch["tgt_out"][i]
            rows[row] = (src[src != 0].tolist(), tgt[tgt != 0].tolist())
    return rows


SENTENCEPIECE = {"type": "sentencepiece", "vocab_size": 100}


@pytest.mark.parametrize("tokenizer", [None, SENTENCEPIECE, {**SENTENCEPIECE, "model_type": "bpe"}],
                         ids=["bpe", "sentencepiece-unigram", "sentencepiece-bpe"])
def test_training_pairs_are_resegmented_every_epoch_and_identically_on_a_rerun(tmp_path, tokenizer):
    dm = datamodule(tmp_path, 0.1, tokenizer=tokenizer)
    first, second = epoch_rows(dm, 0), epoch_rows(dm, 1)
    assert first.keys() == second.keys() == set(range(400))
    changed = [i for i in first if first[i] != second[i]]
    assert len(changed) > 40  # most pairs have a merged token to split
    decode = dm.vocabularies().tgt.decode
    for i in changed[:20]:  # another segmentation of the same text
        assert decode([first[i][1]]) == decode([second[i][1]])
    plain = epoch_rows(datamodule(tmp_path, 0.0, tokenizer=tokenizer), 0)
    assert sum(len(s) + len(t) for s, t in first.values()) > sum(len(s) + len(t) for s, t in plain.values())
    assert epoch_rows(datamodule(tmp_path, 0.1, tokenizer=tokenizer), 1) == second  # a rerun with the same seed
    assert epoch_rows(datamodule(tmp_path, 0.1, seed=2, tokenizer=tokenizer), 1) != second
    in_worker = epoch_rows(datamodule(tmp_path, 0.1, num_workers=1, tokenizer=tokenizer), 1)
    assert in_worker == second  # a DataLoader worker draws what the main process does


@pytest.mark.parametrize("tokenizer", [None, SENTENCEPIECE], ids=["bpe", "sentencepiece"])
def test_a_tagged_corpus_keeps_its_tag_first_in_every_epochs_segmentation(tmp_path, tokenizer):
    dm = datamodule(tmp_path, 0.3, tokenizer=tokenizer,
                    corpora={"copy": ToyCorpus(mode="copy", num_train=100, seed=5, tag="copy")})
    [tag] = dm.vocabularies().source_prefix("copy", "tag")
    for epoch in (0, 1):
        rows = epoch_rows(dm, epoch)
        assert {i for i, (src, _) in rows.items() if src[0] == tag} == set(range(400, 500))
        assert all(tag not in src[1:] for src, _ in rows.values())


def test_batches_fit_the_budget_and_no_row_outgrows_the_longest(tmp_path):
    dm = datamodule(tmp_path, 0.5)
    lengths = dm.datasets["train"].table.with_format("numpy", columns=["src_len", "tgt_len"])[:]
    loader = dm.train_dataloader()
    for batch in loader:
        assert batch["src"].numel() <= 400 and batch["tgt_in"].numel() <= 400
        assert batch["src"].shape[1] <= lengths["src_len"].max()
        assert batch["tgt_out"].shape[1] <= lengths["tgt_len"].max() + 1


def test_validation_test_and_the_cache_stay_deterministic(tmp_path):
    sampled, plain = datamodule(tmp_path, 0.3), datamodule(tmp_path, 0.0)
    assert sampled._ids_folder("train") == plain._ids_folder("train")  # one cache entry: the deterministic ids
    for make in ("val_dataloader", "test_dataloader"):
        for a, b in zip(getattr(sampled, make)(), getattr(plain, make)()):
            assert torch.equal(a["src"], b["src"]) and torch.equal(a["tgt_out"], b["tgt_out"])


@pytest.mark.parametrize("value", [-0.1, 1.0, "0.1", True])
def test_a_bad_probability_is_one_line_naming_the_key(tmp_path, value):
    assert schema_refusal(tmp_path, "data.tokenizer.dropout", value) == \
        f"data.tokenizer.dropout={value!r}: must be a number in [0, 1)"


def test_a_sentencepiece_row_is_sampled_by_its_index_and_key_alone_and_keeps_its_eos(tmp_path):
    dm = datamodule(tmp_path, 0.0, tokenizer=SENTENCEPIECE)
    vocab = dm.vocabularies().src
    eos, unk = vocab.special_ids["eos_id"], vocab.special_ids["unk_id"]
    rows = [ids + [eos] for ids in vocab.encode(["the big dog sees a cat today", "a small cat runs"])]
    seqs = Sequences(np.array(rows[0] + rows[1]), np.array([len(r) for r in rows]))
    sampling = PieceSampling(vocab, 0.1)
    together = sampling(seqs, np.array([10, 11]), key=3)
    alone = sampling(Sequences(np.array(rows[1]), np.array([len(rows[1])])), np.array([11]), key=3)
    assert together.ids[together.lengths[0]:].tolist() == alone.ids.tolist()
    assert together.ids[together.lengths[0] - 1] == eos and alone.ids[-1] == eos
    draws = [sampling(seqs, np.array([10, 11]), key=k) for k in range(8)]
    assert len({tuple(draw.ids.tolist()) for draw in draws}) > 1  # another key (epoch), another segmentation
    for draw in draws:  # always the same text
        cut = int(draw.lengths[0])
        assert vocab.decode([draw.ids[:cut].tolist(), draw.ids[cut:].tolist()]) == vocab.decode(rows)
    with_unk = Sequences(np.array([*rows[0][:3], unk, eos]), np.array([5]))  # decoding would not give it back
    assert all(sampling(with_unk, np.array([0]), key=k).ids.tolist() == with_unk.ids.tolist() for k in range(4))


def test_a_marian_vocabulary_is_refused_by_name(tmp_path):
    vocab = datamodule(tmp_path, 0.0, tokenizer=SENTENCEPIECE).vocabularies().src
    pieces = [vocab.model.id_to_piece(i) for i in range(vocab.vocab_size)]
    marian = MarianVocabulary(vocab.sentencepiece_model(), pieces)
    with pytest.raises(ConfigError, match="data.tokenizer.dropout .* needs a BPE vocabulary of the tokenizers "
                                          "library .* or a sentencepiece one; this run's is MarianVocabulary"):
        resegmenter(marian, 0.1)
