"""Checkpoints as library API: reading one in today's layout whatever version wrote it
(`loading.read_checkpoint`, `upgrades`), its vocabularies and its model's weights, and averaging
several (`averaging`). Decoding a checkpoint is transformer_mt.inference's; a TranslationModule
built from one, training.from_checkpoint's. It knows nothing of Hydra's command line beyond the
`ckpt_path` / `trainer` keys its helpers name in errors."""
