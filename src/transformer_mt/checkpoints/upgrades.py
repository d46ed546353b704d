"""Checkpoints of earlier versions, brought to today's layout when read.

Each upgrade takes a checkpoint (plain data) as one era wrote it and returns it as the next era
writes it; one that is already newer passes through unchanged. `upgrade` runs them all, in order,
once, when `checkpoints.loading.read_checkpoint` reads a file, so everything after that (loading for
decoding, averaging, fine-tuning, resuming) sees one layout. A checkpoint that cannot be upgraded
is a ValueError saying why (the reader names the file).
"""

from collections.abc import Callable

SEARCH_OPTIONS = ("max_len_a", "max_len_b", "min_len", "no_repeat_ngram_size", "use_cache", "check_every")
DERIVED = ("src_vocab_size", "tgt_vocab_size", "pad_id", "bos_id", "eos_id")  # what the tokenizer says


def tokenizer_as_hyper_parameter(checkpoint: dict) -> dict:
    """Until 2026-11-22 the vocabularies sat beside the hyper-parameters: a top-level "tokenizer"
    dict, or in the first checkpoints one joint `tokenizers` JSON string. They become the module's
    `tokenizer` hyper-parameter (None where the checkpoint has none)."""
    hparams = checkpoint["hyper_parameters"]
    if "tokenizer" in hparams:
        return checkpoint
    saved = checkpoint.get("tokenizer")
    if isinstance(saved, str):
        saved = {"src": {"kind": "tokenizers", "data": saved}, "tgt": None}
    rest = {key: value for key, value in checkpoint.items() if key != "tokenizer"}
    return {**rest, "hyper_parameters": {**hparams, "tokenizer": saved}}


def sizes_from_the_tokenizer(checkpoint: dict) -> dict:
    """Until 2026-11-26 the vocabulary sizes and special ids were hyper-parameters of their own; the
    module now derives them from its tokenizer. They are dropped, after checking that the
    tokenizer says the same."""
    from transformer_mt.data.tokenizer import Vocabularies

    hparams = checkpoint["hyper_parameters"]
    saved = {key: hparams[key] for key in DERIVED if key in hparams}
    if not saved or hparams.get("tokenizer") is None:
        return checkpoint
    vocab = Vocabularies.from_dict(hparams["tokenizer"])
    derived = {"src_vocab_size": vocab.src.vocab_size, "tgt_vocab_size": vocab.tgt.vocab_size, **vocab.special_ids()}
    wrong = [f"{key}={value} (its tokenizer: {derived[key]})" for key, value in saved.items() if derived[key] != value]
    if wrong:
        raise ValueError(f"its tokenizer does not match its model: {', '.join(wrong)}")
    kept = {key: value for key, value in hparams.items() if key not in DERIVED}
    return {**checkpoint, "hyper_parameters": kept}


def current_decoding(decoding: dict) -> tuple[dict, str | None]:
    """A decoding config as this version writes it, and the quantize it held (None: none). Before
    SearchOptions every search kept its options flat beside its own, beam search's length
    normalization as a name (fairseq | gnmt) with `length_penalty`, and `quantize`."""
    decoding = dict(decoding)
    quantize = decoding.pop("quantize", None)
    if "options" not in decoding:
        options = {key: decoding.pop(key) for key in SEARCH_OPTIONS if key in decoding}
        decoding["options"] = {"_target_": "transformer_mt.decoding.SearchOptions", **options}
    if str(decoding.get("_target_", "")).endswith("BeamSearch") and not isinstance(decoding.get("length_norm"), dict):
        name, alpha = decoding.pop("length_norm", "fairseq"), decoding.pop("length_penalty", 1.0)
        norm = "GnmtLength" if name == "gnmt" else "PowerLength"
        decoding["length_norm"] = {"_target_": f"transformer_mt.decoding.{norm}", "alpha": alpha}
    return decoding, quantize


def decoding_with_search_options(checkpoint: dict) -> dict:
    """Until 2026-11-26 (SearchOptions) the decoding configs were flat (`current_decoding`), and the
    decoding held `quantize`, now a hyper-parameter of its own."""
    hparams = dict(checkpoint["hyper_parameters"])
    if "decoding" not in hparams:
        return checkpoint
    hparams["decoding"], quantize = current_decoding(hparams["decoding"])
    if hparams.get("val_decoding"):
        hparams["val_decoding"] = current_decoding(hparams["val_decoding"])[0]
    if quantize is not None and "quantize" not in hparams:
        hparams["quantize"] = quantize
    return {**checkpoint, "hyper_parameters": hparams}


def corpus_as_first_of_corpora(checkpoint: dict) -> dict:
    """Until 2026-12-07 a data record named the run's own corpus `corpus` (called `main` in its logs,
    its metrics and its fingerprints) beside `corpora`; it becomes the first entry of `corpora`,
    named `main` (so its training fingerprint is computed as it was)."""
    hparams = checkpoint["hyper_parameters"]
    config = (hparams.get("data") or {}).get("config")
    if not isinstance(config, dict) or "corpus" not in config:
        return checkpoint
    rest = {key: value for key, value in config.items() if key not in ("corpus", "corpora")}
    first = {"main": config["corpus"]} if config["corpus"] is not None else {}
    corpora = {**first, **(config.get("corpora") or {})}
    data = {**hparams["data"], "config": {**rest, "corpora": corpora}}
    return {**checkpoint, "hyper_parameters": {**hparams, "data": data}}


UPGRADES: tuple[Callable[[dict], dict], ...] = (tokenizer_as_hyper_parameter, sizes_from_the_tokenizer,
                                                decoding_with_search_options, corpus_as_first_of_corpora)


def upgrade(checkpoint: dict) -> dict:
    """`checkpoint` with every upgrade applied, in order."""
    for step in UPGRADES:
        checkpoint = step(checkpoint)
    return checkpoint
