"""Models loaded on first use (task.max_loaded): each loaded once, however many requests ask for it
at once, in the decode threads; at most `bound` loaded, the least recently used unloaded; GET
/models says which are loaded; a model whose files fail to load is a 503 naming it, and the next
request tries again."""

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import pytest

from transformer_mt.errors import DataError
from transformer_mt.serving.api import RequestError
from transformer_mt.serving.resident import ResidentModels
from transformer_mt.serving.served import Declared


def declared(*names: str) -> dict[str, Declared]:
    return {name: Declared(name, [Path(f"{name}.ckpt")], {}, None, {("en", "de"): None}) for name in names}


class Loader:
    """Loads a stand-in model by name, recording each load and the thread it ran in."""

    def __init__(self, fail: set[str] = frozenset()) -> None:
        self.loads: list[str] = []
        self.threads: set[str] = set()
        self.fail = set(fail)

    def __call__(self, name: str) -> SimpleNamespace:
        self.loads.append(name)
        self.threads.add(threading.current_thread().name)
        if name in self.fail:
            self.fail.discard(name)
            raise DataError(f"ckpt_path={name}.ckpt: truncated")
        return SimpleNamespace(name=name, info=lambda: {"name": name, "members": 1})


def test_models_load_on_first_use_at_most_the_bound_least_recently_used_unloaded():
    load, told = Loader(), []

    async def scenario() -> tuple[list[str], list[dict]]:
        worker = ThreadPoolExecutor(1, thread_name_prefix="decode")
        models = ResidentModels(declared("a", "b", "c"), load, worker, bound=2, told=told.append)
        got = [(await models.get(name)).name for name in ("a", "b", "a", "c", "b", "a")]
        worker.shutdown()
        return got, models.info()

    got, info = asyncio.run(scenario())
    assert got == ["a", "b", "a", "c", "b", "a"]
    # a, b loaded; a used again; c evicts b (least recently used); b evicts a; a evicts c
    assert load.loads == told == ["a", "b", "c", "b", "a"]
    assert load.threads == {"decode_0"}
    assert [(m["name"], m["loaded"]) for m in info] == [("a", True), ("b", True), ("c", False)]
    assert info[2] == {"name": "c", "checkpoints": ["c.ckpt"], "default_tag": None, "languages": {},
                       "directions": ["en-de"], "language_codes": [], "default_target_lang": None, "loaded": False}


def test_concurrent_first_uses_share_one_load():
    load = Loader()

    async def scenario() -> list[str]:
        models = ResidentModels(declared("a"), load, ThreadPoolExecutor(2), bound=1)
        return [m.name for m in await asyncio.gather(*(models.get("a") for _ in range(16)))]

    assert asyncio.run(scenario()) == ["a"] * 16 and load.loads == ["a"]


def test_a_model_that_fails_to_load_is_a_503_naming_it_and_is_tried_again():
    load = Loader(fail={"a"})

    async def scenario() -> tuple[RequestError, str]:
        models = ResidentModels(declared("a"), load, ThreadPoolExecutor(1), bound=1)
        with pytest.raises(RequestError) as failed:
            await models.get("a")
        return failed.value, (await models.get("a")).name

    failed, name = asyncio.run(scenario())
    assert (failed.status, failed.body()) == (503, {"error": "model=a could not be loaded: ckpt_path=a.ckpt: "
                                                             "truncated", "field": "model"})
    assert name == "a" and load.loads == ["a", "a"]
