"""The decoder step on static shapes (model/static_step.py): the same outputs as the model's own
decode, one compilation per shape, rows kept to the end, and where a Translator uses it."""

import pytest
import torch

from tests.helpers import make_model, padded_sources
from transformer_mt.decoding import BeamSearch, GreedySearch, PowerLength, Sampling, SearchOptions
from transformer_mt.inference.translator import Translator
from transformer_mt.model.static_step import StaticDecoder, StaticState

BOS, EOS = 1, 2


class CountingBackend:
    """A torch.compile backend that runs each graph as traced (no code generation) and counts the
    graphs it was given: one per shape compiled."""

    def __init__(self) -> None:
        self.graphs = 0

    def __call__(self, graph, example_inputs):
        self.graphs += 1
        return graph.forward


def searches() -> dict:
    options = SearchOptions(max_len_a=1.0, max_len_b=6)
    return {"greedy": GreedySearch(options),
            "beam": BeamSearch(3, PowerLength(0.6), nbest=2, options=options),
            "beam, no repeated bigrams": BeamSearch(2, options=SearchOptions(max_len_b=8, no_repeat_ngram_size=2)),
            # draws depend on when ended rows leave the batch: none leave before the end here either
            "sampling, 2 copies": Sampling(nbest=2, seed=3, options=SearchOptions(max_len_b=6, check_every=100))}


def same(a, b) -> None:
    """The same hypotheses (tokens), scores to rounding."""
    assert [[h.tokens for h in nbest] for nbest in a] == [[h.tokens for h in nbest] for nbest in b]
    for x, y in zip(a, b):
        assert [h.score for h in x] == pytest.approx([h.score for h in y], abs=1e-5)


@pytest.mark.parametrize("name", list(searches()))
def test_static_step_gives_the_models_own_hypotheses_and_compiles_once_per_shape(name):
    model, src = make_model(dropout=0.0), padded_sources()
    search, backend = searches()[name], CountingBackend()
    static = StaticDecoder(model, backend=backend)
    reference = search(model, src, BOS, EOS)
    same(search(static, src, BOS, EOS), reference)
    same(search(static, src, BOS, EOS), reference)  # the same shape: its buffers and graph again
    assert backend.graphs == 1
    search(static, src[:2], BOS, EOS)  # fewer rows: another shape
    assert backend.graphs == 2 and len(static.shapes) == 2


def test_a_target_prefix_is_kept_on_the_static_step():
    model, src = make_model(dropout=0.0), padded_sources()
    prefix = torch.tensor([[7, 8], [9, 0], [0, 0], [11, 12]])
    search = BeamSearch(2, options=SearchOptions(max_len_b=5))
    static = StaticDecoder(model, backend=CountingBackend())
    hyps = search(static, src, BOS, EOS, prefix_tokens=prefix)
    same(hyps, search(model, src, BOS, EOS, prefix_tokens=prefix))
    assert hyps[0][0].tokens[:2] == [7, 8] and hyps[3][0].tokens[:2] == [11, 12]


def test_inductor_compiles_the_step_once_and_never_again_for_that_shape():
    model, src = make_model(dropout=0.0, num_decoder_layers=1), padded_sources()
    search = GreedySearch(SearchOptions(max_len_b=4))
    static = StaticDecoder(model)  # inductor, as on a GPU without the CUDA graphs
    same(search(static, src, BOS, EOS), search(model, src, BOS, EOS))
    other = src.flip(0)  # other tokens, the same shape
    with torch.compiler.set_stance("fail_on_recompile"):
        same(search(static, other, BOS, EOS), search(model, other, BOS, EOS))


class RowCounter:
    """A model that records how many rows each decoding step gets, around a StaticDecoder."""

    def __init__(self, inner: StaticDecoder) -> None:
        self.inner, self.config, self.normalized, self.fixed_rows = inner, inner.config, False, True
        self.rows: list[int] = []

    def encode(self, src):
        return self.inner.encode(src)

    def init_cache(self, capacity=None, beams=1, store=True):
        return self.inner.init_cache(capacity, beams, store)

    def decode(self, tgt, memory, src, cache=None):
        self.rows.append(tgt.size(0))
        return self.inner.decode(tgt, memory, src, cache)


def test_rows_that_ended_ride_along_to_the_end_on_static_shapes():
    model, src = make_model(dropout=0.0), padded_sources()
    counter = RowCounter(StaticDecoder(model, backend=CountingBackend()))
    BeamSearch(2, options=SearchOptions(max_len_a=0.0, max_len_b=12))(counter, src, BOS, EOS)
    assert set(counter.rows) == {src.size(0) * 2} and len(counter.rows) > 1


def test_a_static_state_refuses_to_drop_memory_rows_once_started():
    model, src = make_model(dropout=0.0), padded_sources()
    static = StaticDecoder(model, backend=CountingBackend())
    state = static.init_cache(capacity=5, beams=1)
    state.select(torch.tensor([0, 0, 1, 1]), torch.tensor([0, 0, 1, 1]))  # before the first step: nothing kept
    static.decode(torch.full((4, 1), BOS), static.encode(src), src, state)
    with pytest.raises(ValueError, match="keeps every row"):
        state.select(torch.arange(2), torch.arange(2))
    with pytest.raises(ValueError, match="capacity"):
        static.init_cache()
    assert isinstance(state, StaticState) and state.length == 1


def test_the_static_step_is_on_by_default_on_a_gpu_only():
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert not SearchOptions().static(cpu) and SearchOptions().static(cuda)
    assert SearchOptions(static_step=True).static(cpu) and not SearchOptions(static_step=False).static(cuda)
    assert not SearchOptions(static_step=True, use_cache=False).static(cpu)


class SpecialIds:
    """What a Translator reads of its tokenizer to search: the special ids."""

    def special_ids(self) -> dict[str, int]:
        return {"pad_id": 0, "bos_id": BOS, "eos_id": EOS, "unk_id": 3}


def test_a_translator_decodes_through_one_static_step_per_model_when_asked():
    model, src = make_model(dropout=0.0), padded_sources()
    vocabularies = SpecialIds()
    eager = Translator([model], vocabularies, GreedySearch(SearchOptions(max_len_b=5)))
    static = Translator([model], vocabularies, GreedySearch(SearchOptions(max_len_b=5, static_step=True)))
    assert eager.searched(model, eager.search) is model
    chosen = static.searched(model, static.search)
    assert isinstance(chosen, StaticDecoder) and static.searched(model, static.search) is chosen
    assert [h[0].tokens for h in static.hypotheses(src)] == [h[0].tokens for h in eager.hypotheses(src)]
    static.forget()
    assert static.searched(model, static.search) is not chosen
