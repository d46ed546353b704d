"""Leaving and entering the framework: export to Hugging Face Marian and CTranslate2, import from
Marian (OPUS-MT) checkpoints. `transformers` and `ctranslate2` are optional extras
(`pip install -e ".[export]"`), imported only here."""
