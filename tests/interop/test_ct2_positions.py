"""CTranslate2 export of positions inside self-attention (model.positional=rotary and relative,
interop/ctranslate2.py): the spec holds RoPE over whole heads in the NeoX layout, or each layer's
distance embeddings, in self-attention only and with no position table; on a random model its
teacher-forced log-probabilities equal ours; on a toy model of each kind trained for a few seconds,
CTranslate2 float32 gives our greedy outputs token for token on the toy test set (and beam 4's, but
for ties broken the other way), and task=translate task.engine=ctranslate2 writes what
task.engine=ours writes."""

import shutil
from pathlib import Path

import pytest
import torch
from hydra.utils import instantiate

from tests.helpers import compose_config, make_model, once_per_session
from tests.interop.test_export import ct2_translate, ours, pad
from transformer_mt.decoding import BeamSearch, GreedySearch, PowerLength, SearchOptions
from transformer_mt.decoding.search import max_lengths
from transformer_mt.inference.members import load_translator
from transformer_mt.interop.ctranslate2 import build_spec, export_ct2
from transformer_mt.tasks import run

ctranslate2 = pytest.importorskip("ctranslate2", reason="the export extra: pip install -e '.[export]'")

KINDS = ("rotary", "relative")
# 200 steps of model=tiny on 3,000 toy pairs (about 10 seconds on 2 cores): test BLEU ~60, most
# outputs ending before their length limit; no validation (its last.ckpt is the model)
TRAIN = ["trainer.max_steps=200", "data.corpora.toy.num_train=3000", "data.corpora.toy.num_val=10",
         "optim.scheduler.warmup_steps=100", "trainer.check_val_every_n_epoch=1000", "trainer.limit_test_batches=1"]
GREEDY = SearchOptions(max_len_a=1.2, max_len_b=10)


class Tokens:
    """A vocabulary of `size` tokens t0 ... for a random model: what build_spec reads of one."""

    def __init__(self, size: int) -> None:
        self.vocab_size = size

    def tokens(self, ids: list[int]) -> list[str]:
        return [f"t{i}" for i in ids]


class RandomVocab:
    """Source and target vocabularies of a random model (pad 0, BOS 1, EOS 2, UNK 3)."""

    def __init__(self, size: int) -> None:
        self.src = self.tgt = Tokens(size)

    def special_ids(self) -> dict[str, int]:
        return {"pad_id": 0, "bos_id": 1, "eos_id": 2, "unk_id": 3}


def test_the_spec_holds_positions_in_self_attention_only_and_no_table():
    rotary = build_spec(make_model(positional="rotary"), RandomVocab(50))
    for layer in [*rotary.encoder.layer, *rotary.decoder.layer]:
        attention = layer.self_attention
        assert (attention.rotary_dim, attention.rotary_interleave, attention.rotary_base) == (0, False, 10000.0)
    assert not any(hasattr(layer.attention, "rotary_dim") for layer in rotary.decoder.layer)  # not cross-attention
    assert not [name for name in rotary.variables() if "position_encodings" in name]
    model = make_model(positional="relative", max_relative_positions=3)
    relative = build_spec(model, RandomVocab(50))
    assert not [name for name in relative.variables() if "position_encodings" in name]
    for stack, layers in (("encoder", relative.encoder.layer), ("decoder", relative.decoder.layer)):
        for i, layer in enumerate(layers):
            ours_of = getattr(model, f"{stack}_layers")[i].self_attn.relative
            assert (layer.self_attention.relative_position_keys == ours_of.keys.weight.detach().numpy()).all()
            assert (layer.self_attention.relative_position_values == ours_of.values.weight.detach().numpy()).all()
            assert layer.self_attention.relative_position_keys.shape == (7, 8)  # distances -3 ... 3, d_k wide
    assert not any(hasattr(layer.attention, "relative_position_keys") for layer in relative.decoder.layer)


@pytest.mark.parametrize("positional", ["sinusoidal", "fairseq", *KINDS])
def test_teacher_forced_log_probabilities_equal_ours_on_a_random_model(positional, tmp_path):
    """Sources and targets longer than the clipped distances (3) and of different lengths (padded);
    fairseq's table on a pre-norm model, as M2M-100's and NLLB's come (interop/m2m100.py)."""
    model = make_model(positional=positional, max_relative_positions=3, dropout=0.0,
                       norm_first=positional == "fairseq")
    export_ct2(model, RandomVocab(50), tmp_path / "ct2")
    torch.manual_seed(1)
    sources = [torch.randint(4, 50, (n,)).tolist() for n in (9, 4, 14)]
    targets = [torch.randint(4, 50, (n,)).tolist() for n in (11, 6, 3)]
    results = ctranslate2.Translator(str(tmp_path / "ct2"), device="cpu").score_batch(
        [Tokens(50).tokens(s) for s in sources], [Tokens(50).tokens(t) for t in targets])
    src, tgt_in = pad([[*s, 2] for s in sources], 0), pad([[1, *t] for t in targets], 0)
    with torch.no_grad():
        log_probs = model(src, tgt_in).log_softmax(dim=-1)
    for row, (target, result) in enumerate(zip(targets, results)):
        expected = log_probs[row, torch.arange(len(target) + 1), torch.tensor([*target, 2])]
        torch.testing.assert_close(torch.tensor(result.log_probs), expected, rtol=0, atol=1e-4)


def train_and_export(folder: Path, kind: str) -> None:
    """A toy run with model.positional=`kind` (run/) and its float32 task.format=ct2 export (ct2/)."""
    run(compose_config(folder / "run", [f"model.positional={kind}", *TRAIN]))
    ckpt = folder / "run" / "checkpoints" / "last.ckpt"
    run(compose_config(folder / "export", ["task=export", f"ckpt_path={ckpt}", "task.format=ct2",
                                           f"task.output={folder / 'ct2'}"]))


@pytest.fixture(scope="module", params=KINDS)
def trained(request, tmp_path_factory) -> dict:
    """The trained toy model of one kind (once per session), our translator, its toy test set and its export."""
    kind = request.param
    folder = once_per_session(tmp_path_factory, f"ct2_{kind}", lambda f: train_and_export(f, kind))
    ckpt = folder / "run" / "checkpoints" / "last.ckpt"
    test = instantiate(compose_config(folder / "data", TRAIN).data.corpora.toy).load("test")
    return {"kind": kind, "ckpt": ckpt, "ct2": folder / "ct2", "translator": load_translator([ckpt], None),
            "src": test.src}


def limits_of(translator, sources: list[str], options: SearchOptions) -> list[int]:
    """Each sentence's limit on output tokens (our searches')."""
    src = pad(translator.tokenizer.encode_sources(sources), translator.pad_id)
    return max_lengths(src, translator.pad_id, options.max_len_a, options.max_len_b, translator.max_positions).tolist()


def normalized_score(translator, source: str, tokens: list[int], alpha: float) -> float:
    """Our model's log-probability of `tokens` and EOS for `source` over its length (EOS counted) **
    alpha: the score our beam search (PowerLength) ranks a finished hypothesis by."""
    src = pad(translator.tokenizer.encode_sources([source]), translator.pad_id)
    with torch.no_grad():
        log_probs = translator.models[0](src, torch.tensor([[translator.bos_id, *tokens]])).log_softmax(dim=-1)[0]
    total = float(log_probs[torch.arange(len(tokens) + 1), torch.tensor([*tokens, translator.eos_id])].sum())
    return total / (len(tokens) + 1) ** alpha


@pytest.mark.slow
def test_ct2_float32_greedy_and_beam_4_are_ours_token_for_token(trained, record_property):
    """Greedy: every sentence, CTranslate2's output cut at our limit where ours reached it. Beam 4
    (length penalty 0.6), every sentence ours ended before its limit: the same hypothesis, or one
    that ours scores within 1e-4 of its own (a tie broken the other way by the sums' rounding: one
    sentence of 300 in one of the runs tried, 1.8e-5 apart)."""
    translator, sources = trained["translator"], trained["src"]
    limits = limits_of(translator, sources, GREEDY)
    mine = ours(translator, sources, GreedySearch(options=GREEDY))
    theirs = ct2_translate(trained["ct2"], translator, sources, beam_size=1, max_decoding_length=max(limits) + 1)
    ended = [i for i, (tokens, limit) in enumerate(zip(mine, limits)) if len(tokens) < limit]
    record_property("greedy_ended_before_the_limit", len(ended) / len(sources))
    assert len(sources) == 300 and len(ended) >= 0.8 * len(sources), len(ended)  # a model that learned something
    assert [t[:limit] for t, limit in zip(theirs, limits)] == mine

    mine = ours(translator, sources, BeamSearch(beam_size=4, length_norm=PowerLength(0.6), options=GREEDY))
    theirs = ct2_translate(trained["ct2"], translator, sources, beam_size=4, length_penalty=0.6,
                           max_decoding_length=max(limits) + 1)
    ended = [i for i, (tokens, limit) in enumerate(zip(mine, limits)) if len(tokens) < limit]
    differ = [i for i in ended if theirs[i] != mine[i]]
    record_property("beam_4_alike", 1 - len(differ) / len(ended))
    assert len(ended) >= 0.8 * len(sources) and len(differ) <= 0.01 * len(ended), (len(ended), differ)
    gaps = [abs(normalized_score(translator, sources[i], theirs[i], 0.6)
                - normalized_score(translator, sources[i], mine[i], 0.6)) for i in differ]
    assert all(gap < 1e-4 for gap in gaps), gaps


@pytest.mark.slow
def test_task_translate_with_the_ctranslate2_engine_equals_ours(trained, tmp_path):
    """task=translate ... task.engine=ctranslate2 converts the checkpoint itself and writes, in greedy
    float32, what task.engine=ours writes, line for line."""
    (tmp_path / "model").mkdir()
    ckpt = shutil.copy(trained["ckpt"], tmp_path / "model" / "last.ckpt")  # the conversion is written beside it
    (tmp_path / "in.txt").write_text("".join(line + "\n" for line in trained["src"]))

    def translate(name: str, *overrides: str) -> list[str]:
        run(compose_config(tmp_path / name, ["task=translate", f"ckpt_path={ckpt}", f"task.input={tmp_path}/in.txt",
                                             f"task.output={tmp_path}/{name}.txt", *overrides]))
        return (tmp_path / f"{name}.txt").read_text().splitlines()

    engine = translate("ct2", "task.engine=ctranslate2")
    assert engine == translate("ours") and len(engine) == 300
    assert [p.name.endswith("-float32") for p in (tmp_path / "model" / "ct2").iterdir()] == [True]
