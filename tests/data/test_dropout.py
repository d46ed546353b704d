"""BPE-dropout in the data path (data.tokenizer.dropout, data/dropout.py): merged tokens split back
along the merge tree, re-drawn every epoch from (seed, epoch), the same in every worker and on a
rerun; validation, test and the cache keep the deterministic ids."""

import numpy as np
import pytest
import torch

from transformer_mt.data import TranslationDataModule
from transformer_mt.data.dropout import MergeDropout, Sequences, merge_children
from transformer_mt.data.tokenizer import TokenizerOptions
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


def datamodule(tmp_path, dropout: float, seed: int = 1, **options) -> TranslationDataModule:
    dm = TranslationDataModule(ToyCorpus(num_train=400, num_val=10, num_test=10),
                               TokenizerOptions(vocab_size=300, dropout=dropout), cache_dir=str(tmp_path / "cache"),
                               max_tokens=400, seed=seed, **options)
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


def test_training_pairs_are_resegmented_every_epoch_and_identically_on_a_rerun(tmp_path):
    dm = datamodule(tmp_path, 0.1)
    first, second = epoch_rows(dm, 0), epoch_rows(dm, 1)
    assert first.keys() == second.keys() == set(range(400))
    changed = [i for i in first if first[i] != second[i]]
    assert len(changed) > 40  # most pairs have a merged token to split
    decode = dm.vocabularies.tgt.decode
    for i in changed[:20]:  # another segmentation of the same text
        assert decode([first[i][1]]) == decode([second[i][1]])
    plain = epoch_rows(datamodule(tmp_path, 0.0), 0)
    assert sum(len(s) + len(t) for s, t in first.values()) > sum(len(s) + len(t) for s, t in plain.values())
    assert epoch_rows(datamodule(tmp_path, 0.1), 1) == second  # a rerun with the same seed
    assert epoch_rows(datamodule(tmp_path, 0.1, seed=2), 1) != second
    in_worker = epoch_rows(datamodule(tmp_path, 0.1, num_workers=1), 1)
    assert in_worker == second  # a DataLoader worker draws what the main process does


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
def test_a_bad_probability_is_one_line_naming_the_key(value):
    with pytest.raises(ConfigError, match=r"^data.tokenizer.dropout="):
        TokenizerOptions(dropout=value)


def test_sentencepiece_vocabularies_are_refused_by_name(tmp_path):
    with pytest.raises(ConfigError, match="data.tokenizer.dropout .* needs a BPE vocabulary of the tokenizers"):
        dm = TranslationDataModule(ToyCorpus(num_train=400, num_val=10, num_test=10),
                                   TokenizerOptions(type="sentencepiece", vocab_size=100, dropout=0.1),
                                   cache_dir=str(tmp_path / "cache"), max_tokens=400)
        dm.prepare_data()
        dm.setup("fit")
