"""M2M-100 / NLLB-200 folders (M2M100ForConditionalGeneration) read as our Transformer
(interop/m2m100.py): on tiny random models that transformers builds here (no download), our
teacher-forced logits equal theirs, padded batches included, and greedy search with the target
code forced is generate's; fairseq's position table is theirs; the tokenizers' ids are
M2M100Tokenizer's and NllbTokenizer's; what ours cannot represent is refused in one line naming the
config field (fine-tuning, decoding and export: test_language_codes.py)."""


import json
from pathlib import Path

import pytest
import torch

from tests.interop.conftest import NLLB_CODES, SAMPLE, TINY, saved
from transformer_mt.decoding import BeamSearch, GreedySearch, SearchOptions
from transformer_mt.errors import DataError
from transformer_mt.interop.m2m100 import read_m2m100, read_m2m100_model
from transformer_mt.model import Transformer
from transformer_mt.model.positions import fairseq_table

transformers = pytest.importorskip("transformers")

def test_fairseq_table_is_m2m100s_from_its_first_position():
    theirs = transformers.models.m2m_100.modeling_m2m_100.M2M100SinusoidalPositionalEmbedding.get_embedding(
        42, 16, padding_idx=1)
    assert torch.equal(fairseq_table(40, 16), theirs[2:])
    odd = transformers.models.m2m_100.modeling_m2m_100.M2M100SinusoidalPositionalEmbedding.get_embedding(12, 9, 1)
    assert torch.equal(fairseq_table(10, 9), odd[2:])


@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_teacher_forced_logits_equal_transformers(tmp_path, activation):
    folder = saved(tmp_path / "m2m", activation_function=activation)
    architecture, state, config = read_m2m100_model(folder, f"model.init_from={folder}")
    assert (architecture["norm_first"], architecture["positional"], architecture["num_decoder_layers"]) == (
        True, "fairseq", 3)
    ours = Transformer(config).eval()
    ours.load_state_dict(state)
    theirs = transformers.M2M100ForConditionalGeneration.from_pretrained(folder).eval()
    torch.manual_seed(1)
    src = torch.randint(4, 64, (3, 9))
    src[:, -1] = 2
    src[1, 5], src[1, 6:] = 2, 1  # a shorter source, padded
    tgt = torch.randint(4, 64, (3, 7))
    tgt[:, 0] = 2  # the decoder starts from </s>
    with torch.no_grad():
        expected = theirs(input_ids=src, attention_mask=(src != 1).long(), decoder_input_ids=tgt).logits
        got = ours(src, tgt)
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-5)


@pytest.mark.parametrize("overrides, field", [
    ({"scale_embedding": False}, "scale_embedding"),
    ({"decoder_ffn_dim": 24}, "decoder_ffn_dim"),
    ({"pad_token_id": 0, "bos_token_id": 1}, "pad_token_id"),
])
def test_what_ours_cannot_represent_is_refused_naming_the_field(tmp_path, overrides, field):
    folder = saved(tmp_path / "m2m", **overrides)
    with pytest.raises(DataError) as refused:
        read_m2m100_model(folder, f"model.init_from={folder}")
    assert str(refused.value).startswith(f"model.init_from={folder}: config.json's {field} is ")


def test_the_tokenizers_ids_are_m2m100tokenizers(m2m100_folder):
    _, _, vocabularies = read_m2m100(m2m100_folder)
    theirs = transformers.M2M100Tokenizer.from_pretrained(m2m100_folder, src_lang="en", tgt_lang="de")
    assert vocabularies.src.encode(SAMPLE) == [theirs(line, add_special_tokens=False).input_ids for line in SAMPLE]
    english = vocabularies.src.token_id("__en__")
    assert english == theirs.get_lang_id("en") and "__de__" in vocabularies.src.tag_tokens()
    assert vocabularies.encode_sources(SAMPLE, [english]) == [theirs(line).input_ids for line in SAMPLE]
    assert vocabularies.special_ids() == {"pad_id": 1, "bos_id": 2, "eos_id": 2, "unk_id": 3}  # starts from </s>
    # decoded: <unk> ours shows as ⁇ (as every vocabulary of ours does), theirs drops; lines without it compared
    known = [ids for ids in vocabularies.src.encode(SAMPLE) if 3 not in ids]
    outputs = [[theirs.get_lang_id("de"), *ids, 2] for ids in known]
    assert len(known) >= 5  # the forced language code dropped, as the hub's special tokens make theirs drop it
    assert vocabularies.tgt.decode(outputs) == theirs.batch_decode([o[1:] for o in outputs], skip_special_tokens=True)


def test_init_from_reads_an_m2m100_folder_and_its_tokenizer_round_trips(m2m100_folder):
    from transformer_mt.data.tokenizer import Vocabularies
    from transformer_mt.tasks.runs.init_from import read_init_from

    architecture, state, vocabularies = read_init_from(m2m100_folder)
    assert architecture["positional"] == "fairseq" and state["src_embed.weight"].shape[0] == \
        vocabularies.src.vocab_size
    again = Vocabularies.from_dict(vocabularies.to_dict())  # as a checkpoint stores it
    assert again.encode_sources(SAMPLE, [7]) == vocabularies.encode_sources(SAMPLE, [7])
    assert again.special_ids() == vocabularies.special_ids() and again.src.tag_tokens() == vocabularies.src.tag_tokens()
    # its language codes are its tags: task.tag=__en__ (or a corpus's tag) puts __en__ before each source
    assert again.source_prefix("__en__", "task.tag") == [again.src.token_id("__en__")] != [3]


def test_nllbs_tokenizer_ids_are_nllbtokenizers_on_cleaned_text(nllb_folder):
    """Text as our pipeline gives it to a tokenizer (the text rule: ends stripped, inner runs of
    whitespace one space): ids equal NllbTokenizer's; eng_Latn is its tag, before each source."""
    from transformer_mt.data.text import clean

    _, _, vocabularies = read_m2m100(nllb_folder)
    theirs = transformers.NllbTokenizer.from_pretrained(nllb_folder, src_lang="eng_Latn")
    lines = clean(SAMPLE)[0]
    assert vocabularies.src.encode(lines) == [theirs(line, add_special_tokens=False).input_ids for line in lines]
    english = vocabularies.source_prefix("eng_Latn", "task.tag")
    assert english == [theirs.convert_tokens_to_ids("eng_Latn")] and english != [3]
    assert vocabularies.encode_sources(lines, english) == [theirs(line).input_ids for line in lines]
    assert set(NLLB_CODES) <= set(vocabularies.src.tag_tokens())
    assert vocabularies.special_ids() == {"pad_id": 1, "bos_id": 2, "eos_id": 2, "unk_id": 3}
    known = [ids for ids in vocabularies.src.encode(lines) if 3 not in ids]
    outputs = [[theirs.convert_tokens_to_ids("deu_Latn"), *ids, 2] for ids in known]
    assert vocabularies.tgt.decode(outputs) == theirs.batch_decode(outputs, skip_special_tokens=True)


def random_pair(folder: Path, eos_scale: float, **overrides) -> tuple:
    """A random M2M100ForConditionalGeneration of TINY's shape (init_std 1, its EOS row scaled by
    `eos_scale` so that rows end early) and our Transformer read from its saved folder."""
    torch.manual_seed(0)
    theirs = transformers.M2M100ForConditionalGeneration(
        transformers.M2M100Config(**{**TINY, **overrides}, init_std=1.0)).eval()
    with torch.no_grad():
        theirs.model.shared.weight[2] *= eos_scale
    theirs.save_pretrained(folder / "m2m")
    _, state, config = read_m2m100_model(folder / "m2m", "model.init_from")
    ours = Transformer(config).eval()
    ours.load_state_dict(state)
    return theirs, ours


def test_greedy_with_the_target_code_forced_is_generate_token_for_token(tmp_path):
    """Our greedy search, its first output token forced to the target language's code (a target
    prefix), gives generate's tokens with that code as forced_bos_token_id: rows that end by EOS and
    rows that reach the length limit. (The model's EOS row is scaled so that some rows end early.)"""
    theirs, ours = random_pair(tmp_path, 4.0)
    torch.manual_seed(1)
    src = torch.randint(4, 60, (8, 9))
    src[:, -1] = 2
    src[2, 4], src[2, 5:] = 2, 1
    code, most = 60, 20
    with torch.no_grad():
        generated = theirs.generate(input_ids=src, attention_mask=(src != 1).long(), forced_bos_token_id=code,
                                    num_beams=1, do_sample=False, max_new_tokens=most)
        hypotheses = GreedySearch(SearchOptions(max_len_a=0, max_len_b=most))(
            ours, src, 2, 2, prefix_tokens=torch.full((8, 1), code))
    expected = [[t for t in row[1:] if t != 1] for row in generated.tolist()]  # after </s>, the decoder's start
    ended = [row[-1] == 2 for row in expected]
    expected = [row[:-1] if end else row for row, end in zip(expected, ended)]
    assert [nbest[0].tokens for nbest in hypotheses] == expected
    assert any(ended) and not all(ended) and all(row[0] == code for row in expected)


def test_beam_search_with_the_target_code_forced_is_generates(tmp_path):
    """Beam 4 (early stopping, length penalty 1: generate's and ours), the target code forced and
    counted 0 as generate's forced_bos_token_id counts it: every row that generate ends by EOS
    before the length limit gets generate's tokens. (At the limit the two differ by rule: generate
    keeps unfinished beams, ours ends them with EOS and its probability; docs/export.md.)"""
    theirs, ours = random_pair(tmp_path, 12.0, max_position_embeddings=80)
    torch.manual_seed(1)
    src = torch.randint(4, 60, (16, 9))
    src[:, -1] = 2
    code, most = 60, 40
    with torch.no_grad():
        generated = theirs.generate(input_ids=src, attention_mask=(src != 1).long(), forced_bos_token_id=code,
                                    num_beams=4, early_stopping=True, length_penalty=1.0, do_sample=False,
                                    max_new_tokens=most)
        hypotheses = BeamSearch(4, options=SearchOptions(max_len_a=0, max_len_b=most))(
            ours, src, 2, 2, prefix_tokens=torch.full((16, 1), code), free_prefix=1)
    expected = [[t for t in row[1:] if t != 1] for row in generated.tolist()]
    ended = [i for i, row in enumerate(expected) if row[-1] == 2 and len(row) <= most]
    assert len(ended) >= 8
    assert [hypotheses[i][0].tokens for i in ended] == [expected[i][:-1] for i in ended]


@pytest.mark.parametrize(("change", "start"), [
    ({"norm_first": False}, "model.norm_first=false: task.format=hf writes an M2M-100 model here"),
    ({"positional": "sinusoidal"}, "model.positional=sinusoidal: task.format=hf writes an M2M-100 model here"),
    ({"output_bias": True}, "model.output_bias=true"),
    ({"tie_embeddings": "decoder"}, "model.tie_embeddings=decoder"),
])
def test_what_an_m2m100_folder_cannot_hold_is_refused_naming_the_key(change, start):
    from transformer_mt.interop.m2m100_export import m2m100_refusal
    from transformer_mt.model import TransformerConfig

    base = dict(src_vocab_size=64, tgt_vocab_size=64, pad_id=1, d_model=16, heads=2, d_ff=32, norm_first=True,
                positional="fairseq", tie_embeddings="all", output_bias=False)
    assert m2m100_refusal(TransformerConfig(**base)) is None
    assert m2m100_refusal(TransformerConfig(**{**base, **change})).startswith(start)


def test_a_folder_of_another_model_type_is_refused_naming_the_field(tmp_path):
    """NLLB-MoE (model_type nllb_moe) and any other type but marian and m2m_100: one line."""
    from transformer_mt.interop.hub_folder import read_hub_folder

    (tmp_path / "config.json").write_text(json.dumps({"model_type": "nllb_moe"}))
    with pytest.raises(DataError, match=r"config.json's model_type is 'nllb_moe'; transformer-mt reads marian and "
                                        "m2m_100 folders"):
        read_hub_folder(tmp_path, "model.init_from")
