"""model.init_from: a Marian (OPUS-MT layout) folder, written here from a randomly initialised
MarianMTModel with a small sentencepiece vocabulary (no network), becomes our model, tokenizer and
run: logits equal Hugging Face's, import then export gives back the same weights, and training,
evaluate and translate work on it."""

import json
from pathlib import Path

import pytest
import sentencepiece as spm
import torch

from tests.helpers import compose_config, run_py
from transformer_mt.data.toy import ToyCorpus
from transformer_mt.errors import DataError
from transformer_mt.model import Transformer, TransformerConfig
from transformer_mt.tasks import run

transformers = pytest.importorskip("transformers", reason="the export extra: pip install -e '.[export]'")
from transformer_mt.interop.marian import read_marian, to_marian  # noqa: E402


def opus_folder(folder: Path, activation: str = "swish") -> Path:
    """A Marian model folder laid out as OPUS-MT's: vocab.json numbers </s> 0, <unk> 1, the pieces,
    then <pad> last; the decoder starts from <pad>; the output layer has a bias."""
    text = ToyCorpus(num_train=400, num_val=10, num_test=10).load("train")
    folder.mkdir(parents=True)
    spm.SentencePieceTrainer.train(sentence_iterator=iter(text.src + text.tgt), model_prefix=str(folder / "spm"),
                                   vocab_size=120, model_type="unigram")
    sp = spm.SentencePieceProcessor(model_file=str(folder / "spm.model"))
    pieces = ["</s>", "<unk>"] + [sp.id_to_piece(i) for i in range(sp.get_piece_size())
                                  if sp.id_to_piece(i) not in ("<unk>", "<s>", "</s>")] + ["<pad>"]
    (folder / "vocab.json").write_text(json.dumps({p: i for i, p in enumerate(pieces)}))
    for name in ("source.spm", "target.spm"):
        (folder / name).write_bytes((folder / "spm.model").read_bytes())
    v = len(pieces)
    config = transformers.MarianConfig(
        vocab_size=v, decoder_vocab_size=v, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, activation_function=activation,
        max_position_embeddings=128, pad_token_id=v - 1, eos_token_id=0, decoder_start_token_id=v - 1,
        scale_embedding=True, share_encoder_decoder_embeddings=True)
    torch.manual_seed(0)
    model = transformers.MarianMTModel(config)
    with torch.no_grad():
        model.final_logits_bias.normal_(std=0.5)
    model.save_pretrained(folder)
    transformers.MarianTokenizer(str(folder / "source.spm"), str(folder / "target.spm"), str(folder / "vocab.json"),
                                 model_max_length=128).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def opus(tmp_path_factory) -> Path:
    return opus_folder(tmp_path_factory.mktemp("opus") / "model")


def ours_from(folder: Path):
    keys, state, vocab = read_marian(folder)
    ids = vocab.special_ids()
    model = Transformer(TransformerConfig(src_vocab_size=vocab.src.vocab_size, tgt_vocab_size=vocab.tgt.vocab_size,
                                          pad_id=ids["pad_id"], **keys)).eval()
    model.load_state_dict(state)
    return model, vocab


def test_imported_model_and_tokenizer_equal_hugging_face(opus):
    model, vocab = ours_from(opus)
    hf = transformers.MarianMTModel.from_pretrained(opus).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(opus)
    sources = ToyCorpus(num_train=10, num_val=10, num_test=10).load("test").src
    enc = tokenizer(sources, return_tensors="pt", padding=True)
    assert tokenizer(sources)["input_ids"] == vocab.encode_sources(sources)
    pad, start = hf.config.pad_token_id, hf.config.decoder_start_token_id
    assert vocab.special_ids()["bos_id"] == start == pad  # the decoder starts from <pad>, as in Marian
    torch.manual_seed(1)
    tgt_in = torch.randint(2, pad, (len(sources), 9))
    tgt_in[:, 0] = start
    tgt_in[0, 6:] = pad  # a padded target row too
    with torch.no_grad():
        expected = hf(**enc, decoder_input_ids=tgt_in).logits
        got = model(enc["input_ids"], tgt_in)
    real = torch.ones_like(tgt_in, dtype=torch.bool)
    real[0, 6:] = False
    torch.testing.assert_close(got[real], expected[real], rtol=0, atol=1e-4)
    assert vocab.tgt.decode([[5, 6, 7, 0]]) == tokenizer.batch_decode([[5, 6, 7, 0]], skip_special_tokens=True)


def test_import_then_export_gives_back_the_same_weights(opus):
    model, vocab = ours_from(opus)
    ids = vocab.special_ids()
    original = transformers.MarianMTModel.from_pretrained(opus).state_dict()
    again = to_marian(model, ids["bos_id"], ids["eos_id"]).state_dict()
    assert original.keys() == again.keys()
    for name, tensor in original.items():
        assert torch.equal(again[name], tensor), name


def test_a_marian_model_we_cannot_represent_is_refused_with_the_reason(tmp_path):
    folder = opus_folder(tmp_path / "tanh", activation="tanh")
    with pytest.raises(DataError, match=r"model.init_from=.*tanh: a Marian model we cannot represent: "
                                          r"activation 'tanh'"):
        read_marian(folder)
    with pytest.raises(DataError, match=r"model.init_from=.*nowhere: no config.json there"):
        read_marian(tmp_path / "nowhere")


def test_fine_tuning_from_a_marian_folder_then_evaluate_and_translate(opus, tmp_path):
    data = ["data.corpora.toy.num_train=300", "data.corpora.toy.num_val=10", "data.corpora.toy.num_test=10"]
    metrics = run(compose_config(tmp_path / "train", [f"model.init_from={opus}", "trainer.max_epochs=2", *data]))
    hf = transformers.MarianMTModel.from_pretrained(opus)
    # the same parameters, plus the output bias (a buffer in Marian), minus the sinusoid tables (a buffer here)
    marian = sum(p.numel() for name, p in hf.named_parameters() if "embed_positions" not in name)
    assert metrics["num_parameters"] == marian + hf.config.vocab_size
    saved = torch.load(tmp_path / "train" / "checkpoints" / "last.ckpt", weights_only=True)
    assert saved["hyper_parameters"]["model"]["d_model"] == 32 and saved["hyper_parameters"]["tokenizer"]["src"][
        "kind"] == "marian"
    # no optim picked: optim=finetune, at optim.marian_peak (a Marian folder records no schedule)
    assert saved["hyper_parameters"]["scheduler"]["_target_"].endswith("inverse_sqrt")
    assert saved["hyper_parameters"]["optimizer"]["lr"] == 5e-5
    best = tmp_path / "train" / "checkpoints" / "best.ckpt"
    again = run(compose_config(tmp_path / "eval", ["task=evaluate", f"ckpt_path={best}"]))
    assert again["test/bleu"] == metrics["test/bleu"] and again["test/chrf"] == metrics["test/chrf"]
    (tmp_path / "in.txt").write_text("every red city hears the happy sailor\n")
    result = run_py("task=translate", f"ckpt_path={best}", f"task.input={tmp_path}/in.txt",
                    f"hydra.run.dir={tmp_path}/translate")
    assert result.returncode == 0, result.stderr[-2000:]
    assert len(result.stdout.splitlines()) == 1
    resumed = run(compose_config(tmp_path / "train", [f"model.init_from={opus}", "trainer.max_epochs=3", *data,
                                                      f"ckpt_path={tmp_path / 'train' / 'checkpoints' / 'last.ckpt'}"]))
    assert resumed["steps"] == metrics["steps"] * 3 // 2  # a fine-tuning run resumes like any other
