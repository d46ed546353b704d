"""The joint BPE tokenizer: exact detokenization, special ids, save / load."""

from transformer_mt.data.tokenizer import decode, encode, load_tokenizer, save_tokenizer, special_ids, train_bpe

LINES = [
    "Two young, White males are outside near many bushes.",
    "Zwei junge weiße Männer sind im Freien in der Nähe vieler Büsche.",
    "A little girl climbing into a wooden playhouse.",
    "Ein kleines Mädchen klettert in ein Spielhaus aus Holz.",
] * 20


def test_round_trip_restores_the_text(tmp_path):
    tok = train_bpe(LINES, vocab_size=300)
    assert special_ids(tok) == {"pad_id": 0, "bos_id": 1, "eos_id": 2, "unk_id": 3}
    assert decode(tok, encode(tok, LINES[:4])) == LINES[:4]
    # the whitespace rule is part of the tokenizer's normalizer too
    assert decode(tok, encode(tok, ["  A little   girl. "])) == ["A little girl."]
    save_tokenizer(tok, tmp_path / "tok.json")
    again = load_tokenizer(tmp_path / "tok.json")
    assert encode(again, LINES[:4]) == encode(tok, LINES[:4])


def test_smaller_vocabulary_than_asked_is_warned(caplog):
    tok = train_bpe(LINES[:4], vocab_size=5000)
    assert tok.get_vocab_size() < 5000
    assert f"{tok.get_vocab_size()} tokens, fewer than the 5000 asked for" in caplog.text
