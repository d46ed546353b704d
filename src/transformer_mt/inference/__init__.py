"""Inference, without Lightning or Hydra: loading checkpoints (one, or an ensemble's members) for
decoding (`members.load_translator`), the engines behind one protocol (`engine.Engine`: the
Translator, `translator`, and CTranslate2's, `ct2_engine`), lines translated
(`line_translation.translate_lines`: target prefixes, long lines, Pharaoh alignments) and scored
(`scoring.token_logprobs`). Validation, task=evaluate, translate, score and the pipelines'
synthetic stage decode through it."""
