"""task=translate task.alignment=true: `translation<TAB>alignment`, Pharaoh pairs from the
cross-attention, on the default toy job's model. The toy task translates word for word (data/toy.py:
a dictionary per word class, then reordering), so the expected link of each output word is known:
the source word it translates (the k-th occurrence of a word to the k-th of its translation)."""

import pytest

from tests.helpers import compose_config
from transformer_mt.data import toy
from transformer_mt.data.tokenizer import Vocabularies
from transformer_mt.errors import ConfigError
from transformer_mt.tasks import run

pytestmark = pytest.mark.slow

DICTIONARY = {tgt: src for words in (toy.DETERMINERS, toy.NOUNS, toy.ADJECTIVES, toy.VERBS, toy.ADVERBS,
                                     dict([toy.CONJUNCTION])) for src, tgt in words.items()}


def translate(toy_run, tmp_path, lines: list[str], *overrides: str) -> list[str]:
    """task=translate task.alignment=true of `lines` (a file in, a file out), in this process."""
    (tmp_path / "in.txt").write_text("".join(line + "\n" for line in lines))
    run(compose_config(tmp_path / "run", ["task=translate", f"ckpt_path={toy_run[0]}/checkpoints/best.ckpt",
                                          f"task.input={tmp_path}/in.txt", f"task.output={tmp_path}/out.txt",
                                          "task.alignment=true", *overrides]))
    return (tmp_path / "out.txt").read_text().split("\n")[:-1]


def expected(source: str, output: str) -> set[tuple[int, int]]:
    """The (source word, output word) pairs of translation: each output word the toy dictionary
    knows, linked to the occurrence of its source word that has its own rank."""
    src, out = source.split(), output.split()
    links = set()
    for j, word in enumerate(out):
        places = [i for i, w in enumerate(src) if w == DICTIONARY.get(word)]
        rank = out[:j].count(word)
        if rank < len(places):
            links.add((places[rank], j))
    return links


def pairs(alignment: str) -> set[tuple[int, int]]:
    return {tuple(int(x) for x in pair.split("-")) for pair in alignment.split()}


def test_words_are_linked_to_the_words_they_translate(toy_run, tmp_path, record_property):
    """Of 100 test sentences (greedy, the last layer, heads averaged): at least 90% of the output
    words are linked to the source word they translate, and at least 85% of all links are such."""
    sources = toy.ToyCorpus().load("test").src[:100]
    rows = [line.split("\t") for line in translate(toy_run, tmp_path, sources)]
    assert all(len(row) == 2 for row in rows)
    right = links = found = words = 0
    for source, (text, alignment) in zip(sources, rows):
        got, gold = pairs(alignment), expected(source, text)
        assert {j for _, j in got} == set(range(len(text.split())))  # every output word is linked
        assert all(i < len(source.split()) for i, _ in got)
        right, links = right + len(got & gold), links + len(got)
        found, words = found + len(gold & got), words + len(text.split())
    record_property("words_linked", found / words)
    record_property("links_right", right / links)
    assert found >= 0.9 * words and right >= 0.85 * links, (found / words, right / links)


def test_subword_links_are_the_word_links_before_counting_words(toy_run, tmp_path):
    """task.alignment_unit=subwords: indices over the model's tokens (the toy vocabulary marks a
    word's first token with ▁); mapped to words, they give the word alignment."""
    sources = toy.ToyCorpus().load("test").src[:20]
    words = translate(toy_run, tmp_path, sources)
    subwords = translate(toy_run, tmp_path, sources, "task.alignment_unit=subwords")
    tokenizer = Vocabularies.load(toy_run[0] / "tokenizer")

    def word_of(tokens: list[str]) -> list[int]:
        return [sum(t.startswith("▁") for t in tokens[: k + 1]) - 1 for k in range(len(tokens))]

    for source, word_row, subword_row in zip(sources, words, subwords):
        text, alignment = subword_row.split("\t")
        assert word_row.split("\t")[0] == text
        src_tokens = tokenizer.src.tokens(tokenizer.src.encode([source])[0])
        out_tokens = tokenizer.tgt.tokens(tokenizer.tgt.encode([text])[0])
        got = pairs(alignment)
        assert {j for _, j in got} == set(range(len(out_tokens)))  # one link per output token
        src_word, out_word = word_of(src_tokens), word_of(out_tokens)
        assert {(src_word[i], out_word[j]) for i, j in got} == pairs(word_row.split("\t")[1])


def test_alignments_with_a_prefix_nbest_and_scores(toy_run, tmp_path):
    """Beam, 2-best, scores and a prefix the tokenizer cannot spell: line<TAB>score<TAB>text<TAB>
    alignment, the output's words counted as written (the prefix's two words). What the prefix rule
    guarantees for any model (inference/prefix.py), not what this CPU's toy model writes: every
    output starts with the prefix as given; it may end right after it, or continue its last word
    ("Lo Hündund ...")."""
    lines = ["the dog sees a big cat\tLo Hünd", "", "some book builds this boat\t"]
    out = translate(toy_run, tmp_path, lines, "task.prefix=true", "decoding=beam", "decoding.nbest=2")
    rows = [line.split("\t") for line in out]
    assert [row[0] for row in rows] == ["0", "0", "1", "1", "2", "2"] and all(len(row) == 4 for row in rows)
    assert rows[2][2:] == ["", ""]
    for row in rows[:2]:
        assert row[2].startswith("Lo Hünd") and row[2].split()[0] == "Lo", row[2]
        assert {j for _, j in pairs(row[3])} == set(range(len(row[2].split())))


def test_a_layer_or_head_the_model_lacks_is_a_config_error(toy_run, tmp_path):
    with pytest.raises(ConfigError, match=r"task.alignment_layer=2: the model has 2 decoder layers \(0 to 1"):
        translate(toy_run, tmp_path, ["the cat"], "task.alignment_layer=2")
    with pytest.raises(ConfigError, match="task.alignment_heads=9: must be mean, max or a head number"):
        translate(toy_run, tmp_path, ["the cat"], "task.alignment_heads=9")
    with pytest.raises(ConfigError, match="task.alignment_unit='chars': must be words or subwords"):
        translate(toy_run, tmp_path, ["the cat"], "task.alignment_unit=chars")
