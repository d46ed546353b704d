"""The served models by name, each loaded once, in the decode threads (torch runs in no other):
all of them at start (task.max_loaded null), or each on its first request with at most
task.max_loaded loaded at once, the least recently used one unloaded to make room (quickmt's LRU of
models). What the server needs of a model before it is loaded (its name, checkpoints and
directions: the LibreTranslate mount's languages, GET /models) is its `Declared`, read at start
from the checkpoints' hyper-parameters, memory-mapped, without building the model."""

import asyncio
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Executor

from transformer_mt.errors import UserError
from transformer_mt.serving.api import RequestError
from transformer_mt.serving.served import Declared, ServedModel

Load = Callable[[str], ServedModel]  # a model loaded by name (in a decode thread)
Told = Callable[[str], None]  # told of each model loaded on first use (the metrics)


class ResidentModels:
    """The models a server answers with: each `declared` one loaded by `load` in `worker`'s threads
    on its first use, at most `bound` at once (None: no bound; `loaded` holds those loaded at start)."""

    def __init__(self, declared: dict[str, Declared], load: Load, worker: Executor | None, bound: int | None,
                 loaded: dict[str, ServedModel] | None = None, told: Told | None = None) -> None:
        self.declared, self.load, self.worker, self.bound, self.told = declared, load, worker, bound, told
        self.loaded: OrderedDict[str, ServedModel] = OrderedDict(loaded or {})  # least recently used first
        self.loading: dict[str, asyncio.Future] = {}  # first uses under way: one load each, awaited by all

    @classmethod
    def all_loaded(cls, models: dict[str, ServedModel]) -> "ResidentModels":
        """Models loaded at start and kept (no bound)."""
        return cls({name: served.declared() for name, served in models.items()}, lambda name: models[name], None,
                   None, models)

    @property
    def names(self) -> list[str]:
        """The served models' names, the default first."""
        return list(self.declared)

    async def get(self, name: str) -> ServedModel:
        """The model `name` (one of `names`), loaded if it is not (concurrent first uses share one
        load), then the most recently used; past the bound, the least recently used one unloaded
        (requests already holding it finish with it)."""
        if name in self.loaded:
            self.loaded.move_to_end(name)
            return self.loaded[name]
        if name not in self.loading:
            self.loading[name] = asyncio.ensure_future(self.first_use(name))
        return await asyncio.shield(self.loading[name])

    async def first_use(self, name: str) -> ServedModel:
        """The model loaded (a fault of its files: a 503 naming it, and the next request tries again)."""
        try:
            served = await asyncio.get_running_loop().run_in_executor(self.worker, self.load, name)
        except UserError as err:
            raise RequestError("model", f"model={name} could not be loaded: {err}", status=503) from None
        finally:
            del self.loading[name]
        self.loaded[name] = served
        while self.bound is not None and len(self.loaded) > self.bound:
            self.loaded.popitem(last=False)
        if self.told is not None:
            self.told(name)
        return served

    def info(self) -> list[dict]:
        """GET /models: each model's information, in full where it is loaded."""
        return [{**self.loaded[name].info(), "loaded": True} if name in self.loaded else
                {**declared.info(), "loaded": False} for name, declared in self.declared.items()]
