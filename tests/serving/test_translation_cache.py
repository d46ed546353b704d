"""The translation cache (serving/translation_cache.py): bounded, least recently used dropped first; each line
keyed by how it decodes and its text; a request with lines kept and lines not decodes the others
alone, with their prefixes, constraints and source ids."""

import asyncio
from types import SimpleNamespace

from transformer_mt.serving.batcher import Batcher, Pending
from transformer_mt.serving.decode import Decoded, Work, line_keys, part
from transformer_mt.serving.translation_cache import TranslationCache, decoded


def test_the_least_recently_used_line_goes_first_and_size_0_keeps_none():
    cache = TranslationCache(2)
    cache.keep(["a", "b", None], [("A", None), ("B", None), ("never", None)])
    assert cache.found(["a", None]) == [("A", None), None]  # "a" used: "b" is now the oldest
    cache.keep(["c"], [("C", None)])
    assert cache.found(["a", "b", "c"]) == [("A", None), None, ("C", None)]
    none = TranslationCache(0)
    none.keep(["a"], [("A", None)])
    assert none.found(["a"]) == [None]


def work(lines: list[str], random: bool = False, prefixes=None, constraints=None, tag: int = 5) -> Work:
    """A request's Work for `lines`, each line's source ids its tag's token, its characters' and EOS."""
    search = SimpleNamespace(capabilities=SimpleNamespace(random=random))
    sources = tuple([tag, *map(ord, line), 2] for line in lines)
    return Work(None, search, prefixes, False, None, 100, constraints, sources)


def test_a_line_is_keyed_by_its_batch_key_source_ids_prefix_and_constraints_and_sampling_never():
    """The source ids, not the text: their first token is the tag, so another direction is another key."""
    lines = ["a", "b", "a"]
    job = Pending(("m", "beam"), lines, 9, work(lines, prefixes=["x", "y", "z"], constraints=[["p"], [], []]))
    assert line_keys(job) == [(("m", "beam"), (5, 97, 2), "x", ("p",)), (("m", "beam"), (5, 98, 2), "y", ()),
                              (("m", "beam"), (5, 97, 2), "z", ())]
    assert line_keys(Pending(("m", "beam"), ["a"], 3, work(["a"], tag=6)))[0][1] == (6, 97, 2)
    assert line_keys(Pending(("m",), ["a"], 3, work(["a"], random=True))) == [None]


def test_part_of_a_job_is_its_lines_with_their_prefixes_constraints_and_source_ids():
    lines = ["a", "bb", "ccc"]
    job = Pending(("m",), lines, 15, work(lines, prefixes=["x", "y", "z"], constraints=[["p"], ["q"], ["r"]]),
                  model="m")
    kept = part(job, [0, 2])
    assert (kept.lines, kept.tokens, kept.key, kept.model) == (["a", "ccc"], 3 + 5, ("m",), "m")
    assert (kept.payload.prefixes, kept.payload.constraints, kept.payload.sources) == (
        ["x", "z"], [["p"], ["r"]], ([5, 97, 2], [5, 99, 99, 99, 2]))


def test_a_request_decodes_only_the_lines_the_cache_does_not_hold():
    """... each line a job of its own (the pool's unit), decoded together where they wait together."""
    sent = []

    def decode(jobs: list[Pending]) -> list[Decoded]:
        sent.append([line for job in jobs for line in job.lines])
        assert all(len(job.lines) == 1 for job in jobs)
        return [Decoded([[line.upper()] for line in job.lines], [None] * len(job.lines)) for job in jobs]

    async def scenario() -> list:
        batcher, cache = Batcher(decode, max_tokens=100, max_wait_ms=0), TranslationCache(10)
        batcher.start()
        out = [await decoded(Pending(("m",), lines, 3 * len(lines), work(lines)), batcher, cache)
               for lines in (["a", "b"], ["b", "c", "a"], ["c"])]
        await batcher.stop()
        return out

    (first, _), (second, cached), (third, all_cached) = asyncio.run(scenario())
    assert sent == [["a", "b"], ["c"]]
    assert second.nbests == [["B"], ["C"], ["A"]] and cached == 2 and third.nbests == [["C"]] and all_cached == 1
