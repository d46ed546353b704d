"""Checkpoints as library API: reading one in today's layout whatever version wrote it
(`loading.read_checkpoint`, `upgrades`), a ready module from one or several (`loading.load_module`),
and averaging them (`averaging`). Tasks and experiments build on this; it knows nothing of Hydra's
command line beyond the `ckpt_path` / `trainer` keys its helpers name in errors."""
