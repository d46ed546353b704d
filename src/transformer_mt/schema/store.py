"""Registers the schema in Hydra's ConfigStore: `run_schema` under conf/config.yaml, and each option
node of the data, decoding, optim and logger groups (and each of our callbacks) as schema_GROUP_NAME, which
conf/GROUP/NAME.yaml (for data's: conf/data_shared.yaml; for a callback: where a callbacks option
places it) extends. The task classes, which name their runners, are registered
above it (tasks/options: `register`, which calls this one); run.py and the tests' composing call that
once before Hydra composes."""

from hydra.core.config_store import ConfigStore

from transformer_mt.schema.callback_keys import CALLBACKS
from transformer_mt.schema.data_keys import DATA
from transformer_mt.schema.logger_keys import LOGGERS
from transformer_mt.schema.optim import OPTIMS
from transformer_mt.schema.search_keys import SEARCHES
from transformer_mt.schema.top import RunConfig


def register_groups() -> None:
    """The top level and the groups' option nodes in the ConfigStore (storing again replaces them)."""
    store = ConfigStore.instance()
    store.store(name="run_schema", node=RunConfig)
    for group, options in (("data", DATA), ("decoding", SEARCHES), ("optim", OPTIMS), ("callbacks", CALLBACKS),
                           ("logger", LOGGERS)):
        for name, kind in options.items():
            store.store(name=f"schema_{group}_{name}", node=kind)  # not a group: --help lists groups
