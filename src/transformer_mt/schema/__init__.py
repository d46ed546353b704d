"""The config's schema: every key of the top level, of the `model`, `module`, `trainer`, `paths` and
`data` groups, of each option of the `decoding` and `optim` groups, of each logger and of our
callbacks that take settings declared once, with its default, what
it must be and a one-line description (Hydra structured configs, registered in the ConfigStore by
`store.register_groups`, composed with the YAML groups of conf/), and what a task class declares
(task_base.py, shared.py: the task classes themselves, which name their runners, are the tasks
package's, tasks/options). The rules between keys are each group's `refusal` (a function
answering its one line or None), those between groups RunConfig's (between_groups.py).
`keys.check_keys` tests a composed config against it before any work; tasks/options/reference.py
writes docs/configuration.md from it. What is left (the corpora and Lightning's own callbacks:
constructor calls, `_target_`) is declared by their constructors' signatures and checked by them.
Imports no torch: run.py registers it before Hydra composes."""
