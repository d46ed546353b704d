"""The config's schema: every key of the top level, of the `model`, `module` and `trainer` groups
and of the task group declared once, with its default, what it must be and a one-line description
(Hydra structured configs, registered in the ConfigStore by `store.register`, composed with the YAML
groups of conf/); the rules between keys are each group's `check_together`. `keys.check_keys` tests a
composed config against it before any work; `reference` writes docs/configuration.md from it. The
other groups that are constructor calls (`_target_`: data, decoding, optim, callbacks, logger) are
declared by their constructors' signatures and checked by them. Imports no torch: run.py registers
it before Hydra composes."""
