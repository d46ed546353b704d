"""The config's schema: every key of the top level and of the task group declared once, with its
default, what it must be and a one-line description (Hydra structured configs, registered in the
ConfigStore by `store.register`, composed with the YAML groups of conf/). `keys.check_keys` tests a
composed config against it before any work; `reference` writes docs/configuration.md from it. The groups
that are constructor calls (`_target_`: data, decoding, optim, trainer, callbacks, logger) are
declared by their constructors' signatures and checked by them. Imports no torch: run.py registers
it before Hydra composes."""
