"""A corpus's tag: never one of the special tokens (refused in one line naming the key, before any
work), and text that spells a tag or a special token is encoded as text, with BPE and with
sentencepiece alike (tags reach a source as ids, never through the text)."""

import pytest

from tests.helpers import compose_config
from transformer_mt.data.tokenizer import TokenizerOptions, tag_token
from transformer_mt.data.vocabulary_training import build_vocabularies
from transformer_mt.errors import ConfigError, find_user_error
from transformer_mt.tasks import run

LINES = [f"the dog number {i} sees a cat and runs home" for i in range(200)] + ["a <b> c / d p y"]


@pytest.mark.parametrize("tag, token, role", [("pad", "<pad>", "padding"), ("<s>", "<s>", "start-of-sentence"),
                                              ("unk", "<unk>", "unknown-word")])
def test_a_tag_that_is_a_special_token_is_refused_naming_the_key(tag, token, role):
    with pytest.raises(ConfigError, match=rf"^data.corpora.copy.tag={tag}: {token} is the vocabulary's {role} token; "
                                          rf"a tag needs a token of its own \(e.g. data.corpora.copy.tag=\w+_tag\)$"):
        tag_token(tag, "data.corpora.copy.tag")
    with pytest.raises(ConfigError, match=r"^task.tag='/s': must be one word"):  # </s>: not a word at all
        tag_token("/s", "task.tag")
    assert tag_token("copy", "task.tag") == "<copy>" == tag_token("<copy>", "task.tag")


def test_a_run_whose_corpus_tag_is_pad_stops_before_any_work(tmp_path):
    copy = ("+data.corpora.copy={_target_: transformer_mt.data.ToyCorpus, mode: copy, num_train: 50, num_val: 5, "
            "num_test: 5, weight: 0.5, tag: pad}")
    with pytest.raises(Exception) as raised:  # noqa: PT011  (Hydra wraps the corpus node's error)
        run(compose_config(tmp_path / "run", [copy]))
    assert str(find_user_error(raised.value)).startswith("data.corpora.copy.tag=pad: <pad> is the vocabulary's "
                                                         "padding token")
    assert not (tmp_path / "run" / "checkpoints").exists()


@pytest.mark.parametrize("kind", ["bpe", "sentencepiece"])
def test_text_that_spells_a_tag_or_a_special_token_is_encoded_as_text(kind):
    options = TokenizerOptions(type=kind, vocab_size=150, min_frequency=1)
    vocab = build_vocabularies(iter(LINES), iter(LINES), options, ["<copy>"])
    [tag] = vocab.source_prefix("copy", "task.tag")
    ids_of = vocab.special_ids()
    specials = {ids_of["pad_id"], ids_of["bos_id"], ids_of["eos_id"], tag}  # <unk>: a character never seen
    for line in ("<copy> the dog", "the </s> dog <pad> sees <s> a <unk> cat"):
        ids = vocab.encode_sources([line])[0]
        assert not specials & set(ids[:-1]) and ids[-1] == vocab.special_ids()["eos_id"], (kind, line)
    assert vocab.encode_sources(["the dog"], prefix=[tag])[0][0] == tag  # the tag itself: as an id


@pytest.mark.parametrize("kind", ["bpe", "sentencepiece"])
def test_a_tag_the_vocabulary_lacks_is_refused_naming_the_ones_it_has(kind):
    options = TokenizerOptions(type=kind, vocab_size=150, min_frequency=1)
    vocab = build_vocabularies(iter(LINES), iter(LINES), options, ["<copy>", "<bt>"])
    assert sorted(vocab.src.tag_tokens()) == ["<bt>", "<copy>"]
    with pytest.raises(ConfigError, match=r"^task.tag=fr: the vocabulary has no token <fr> \(a vocabulary "
                                          r"trained with tagged corpora has their tags; this one has <(copy|bt)>, "
                                          r"<(copy|bt)>\)$"):
        vocab.source_prefix("fr", "task.tag")
    plain = build_vocabularies(iter(LINES), iter(LINES), options)
    with pytest.raises(ConfigError, match=r"this one has none\)$"):
        plain.source_prefix("bt", "task.tag")
