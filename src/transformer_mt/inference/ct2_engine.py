"""task.engine=ctranslate2: a checkpoint decoded by CTranslate2 instead of our searches, an Engine
(engine.py) as our Translator is, so that reading, long lines, tags, target prefixes, batching and
writing stay ours.

The checkpoint is converted once (interop/ctranslate2.py), into a folder named by the checkpoint's
digest and the quantization (`<stem>-<digest>-<float32|int8>/`), written whole or not at all, and
found there by the next run. It lies in task.ct2_dir where that is set (refused in one line where it
cannot be written), else in ct2/ beside the checkpoint, unless the checkpoint's folder cannot be
written or lies inside a git work tree (a shared model folder, a read-only mount, a repository's
shipped model): then in the user cache's ct2/ (user_cache.py). The decoding config maps onto
CTranslate2's options: greedy search; beam search with `length_norm` PowerLength (CTranslate2's
exponential length penalty), `nbest`; sampling with temperature, top-k, top-p and seed (each
search's part by what it declares: decoding/strategy.py); `options.min_len`, `no_repeat_ngram_size`;
each output cut at its own length limit (max_len_a * src_len + max_len_b, CTranslate2 taking one
limit per batch). What it cannot do (an ensemble, alignments, constraints, GNMT's length penalty:
what Ct2Translator.capabilities does not declare) is refused in one line. The scores are
CTranslate2's. The checkpoint's lexical table (task=shortlist), where it has one, is the folder's
vmap.txt (interop/ct2_vmap.py), which decoding.shortlist=true decodes with (CTranslate2's use_vmap)."""

import copy
import logging
import tempfile
from pathlib import Path

import torch

from transformer_mt.atomic import atomic_dir
from transformer_mt.data.corpus import file_digest
from transformer_mt.data.tokenizer import Vocabularies
from transformer_mt.decoding.beam import PowerLength
from transformer_mt.decoding.constraints import Phrase
from transformer_mt.decoding.search import Hypothesis, max_lengths
from transformer_mt.decoding.strategy import Search
from transformer_mt.errors import ConfigError
from transformer_mt.inference.engine import Engine, EngineCapabilities
from transformer_mt.inference.shortlist_loading import table_beside
from transformer_mt.inference.translator import Translator
from transformer_mt.inference.workers import SERIAL, Workers
from transformer_mt.interop.ct2_vmap import write_vmap
from transformer_mt.interop.ctranslate2 import export_ct2
from transformer_mt.user_cache import user_cache
from transformer_mt.validate import Refusal, refuse

log = logging.getLogger(__name__)

WEIGHTS = {"none": "float32", "int8": "int8"}  # quantize -> the converted model's weights


def cannot_write(folder: Path) -> str | None:
    """Why `folder` (made where missing) cannot take new files, e.g. "Permission denied"; None where it can."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        Path(tempfile.mkdtemp(dir=folder, prefix=".probe.")).rmdir()
    except OSError as err:
        return err.strerror or str(err)
    return None


def inside_git_work_tree(folder: Path) -> bool:
    """Whether `folder` or a folder above it holds .git (a folder; a file for a worktree or a submodule)."""
    folder = folder.resolve()
    return any((above / ".git").exists() for above in (folder, *folder.parents))


def given_root(ct2_dir: str) -> Path:
    """The folder task.ct2_dir names, a ConfigError naming the key and the cause where it cannot be written."""
    root = Path(ct2_dir).expanduser()
    if (cause := cannot_write(root)) is not None:
        raise ConfigError(f"task.ct2_dir={ct2_dir}: cannot write the converted model there ({cause})")
    return root


def ct2_root(checkpoint: Path, ct2_dir: str | None = None) -> Path:
    """The folder the conversions of `checkpoint` lie in: task.ct2_dir where given; else ct2/ beside the
    checkpoint where its folder can be written and lies outside any git work tree; else the user cache's ct2/."""
    if ct2_dir is not None:
        return given_root(ct2_dir)
    beside = checkpoint.parent / "ct2"
    if inside_git_work_tree(checkpoint.parent):
        why = "lies inside a git work tree"
    elif (cause := cannot_write(beside)) is not None:
        why = f"cannot be written ({cause})"
    else:
        return beside
    cache = user_cache() / "ct2"
    if (cause := cannot_write(cache)) is not None:
        raise ConfigError(f"task.engine=ctranslate2: the checkpoint's folder {checkpoint.parent} {why}, and the "
                          f"user cache {cache} cannot be written ({cause}): give the conversion a folder with "
                          "task.ct2_dir=DIR")
    log.info("task.engine=ctranslate2: the checkpoint's folder %s %s: the conversion goes into the user cache %s "
             "(task.ct2_dir=DIR gives it another folder)", checkpoint.parent, why, cache)
    return cache


def converted(checkpoint: Path, model, tokenizer: Vocabularies, quantize: str, ct2_dir: str | None = None) -> Path:
    """The CTranslate2 model folder of `checkpoint` (a file, or a Hugging Face folder: its files'
    digest) under ct2_root (converted now unless a run did it before), with the checkpoint's lexical
    table as its vmap.txt where it has one (written again if it changed)."""
    weights = WEIGHTS[quantize]
    files = sorted(p for p in checkpoint.iterdir() if p.is_file()) if checkpoint.is_dir() else [checkpoint]
    folder = ct2_root(checkpoint, ct2_dir) / f"{checkpoint.stem}-{file_digest(*files)[:16]}-{weights}"
    if (folder / "model.bin").is_file():
        log.info("task.engine=ctranslate2: %s, converted before", folder)
    else:
        with atomic_dir(folder) as tmp:
            export_ct2(model, tokenizer, tmp, "none" if weights == "float32" else weights)
        log.info("task.engine=ctranslate2: %s converted into %s", checkpoint, folder)
    if (table := table_beside(checkpoint, tokenizer)) is not None:
        write_vmap(folder, table, tokenizer)
    return folder


def engine_options(search: Search) -> dict:
    """CTranslate2's translate_batch options for one of our searches, by what it declares (a
    ConfigError for what CTranslate2 cannot do: Ct2Translator.capabilities)."""
    options, declared = search.options, search.capabilities
    found = {"min_decoding_length": options.min_len, "no_repeat_ngram_size": options.no_repeat_ngram_size,
             "return_scores": True, "beam_size": 1}
    if declared.nbest:
        found["num_hypotheses"] = search.nbest
    if declared.beams:
        if not (Ct2Translator.capabilities.any_length_norm or isinstance(search.length_norm, PowerLength)):
            raise ConfigError("task.engine=ctranslate2 has only the exponential length penalty: "
                              "decoding.length_norm._target_=transformer_mt.decoding.PowerLength")
        found |= {"beam_size": search.beam_size, "length_penalty": search.length_norm.alpha}
    if declared.random:
        found |= {"sampling_topk": search.top_k, "sampling_topp": search.top_p,
                  "sampling_temperature": search.temperature}
    return found


class Ct2Translator(Engine):
    """Token ids in, hypotheses out, decoded by CTranslate2 with the search it is made with (engine.py)."""

    capabilities = EngineCapabilities(ensembles=False, alignments=False, constraints=False,
                                      any_length_norm=False)  # CTranslate2's length_penalty: PowerLength's

    def __init__(self, folder: Path, tokenizer: Vocabularies, search: Search, max_positions: int, device: torch.device,
                 inter: int = 1, intra: int = 1, shortlist: bool = False) -> None:
        """inter, intra: CTranslate2's inter_threads and intra_threads on the CPU (our Workers' decoders
        give it that many batches at once: inference/workers.py)."""
        import ctranslate2

        self.tokenizer, self.search, self.max_positions = tokenizer, search, max_positions
        ids = tokenizer.special_ids()
        self.pad_id, self.bos_id, self.eos_id = ids["pad_id"], ids["bos_id"], ids["eos_id"]
        self.device = torch.device("cpu")  # the batches' ids: CTranslate2 takes tokens from the host
        self.options = engine_options(search) | ({"use_vmap": True} if shortlist else {})  # vmap.txt
        if search.capabilities.random and search.seed is not None:
            ctranslate2.set_random_seed(search.seed)
        self.engine = ctranslate2.Translator(str(folder), device="cuda" if device.type == "cuda" else "cpu",
                                             device_index=device.index or 0, compute_type="default",
                                             inter_threads=inter if device.type == "cpu" else 1,
                                             intra_threads=intra if device.type == "cpu" else 0)

    def with_search(self, search: Search) -> "Ct2Translator":
        """The same CTranslate2 translator (shared, not loaded again) decoding with `search` (a
        server's request options; its length norm CTranslate2's, as engine_options says)."""
        other = copy.copy(self)
        other.search, other.options = search, engine_options(search) | {
            key: value for key, value in self.options.items() if key == "use_vmap"}
        return other

    def reseed(self, seed: int) -> None:
        """CTranslate2's random numbers (sampling) from `seed` (a chunk's: the same after a resume)."""
        import ctranslate2

        ctranslate2.set_random_seed(seed % 2**32)

    def hypotheses(self, src: torch.Tensor, search: Search | None = None, prefix_tokens: torch.Tensor | None = None,
                   constraints: list[list[Phrase]] | None = None, free_prefix: int = 0) -> list[list[Hypothesis]]:
        """The n-best of each row of src (B, S, EOS last), each cut at its own length limit, by the
        search it was made with (another, or constraints: a ValueError); CTranslate2 scores every
        prefix token (`free_prefix` is not its)."""
        if (search is not None and search is not self.search) or any(constraints or []):
            raise ValueError("CTranslate2 decodes with the search it was made with, without constraints")
        options = self.search.options
        limits = max_lengths(src, self.pad_id, options.max_len_a, options.max_len_b, self.max_positions).tolist()
        rows = [[t for t in row if t != self.pad_id][:-1] for row in src.tolist()]  # CTranslate2 adds EOS
        prefixes = None
        if prefix_tokens is not None:
            prefixes = [self.tokenizer.tgt.tokens([t for t in row if t != self.pad_id]) or None
                        for row in prefix_tokens.tolist()]
            limits = [max(limit, len(p or [])) for limit, p in zip(limits, prefixes)]
        results = self.engine.translate_batch([self.tokenizer.src.tokens(row) for row in rows], prefixes,
                                              max_decoding_length=max(limits) + 1, **self.options)
        return [[self.hypothesis(tokens, score, limit) for tokens, score in zip(r.hypotheses, r.scores)]
                for r, limit in zip(results, limits)]

    def hypothesis(self, tokens: list[str], score: float, limit: int) -> Hypothesis:
        ids = [self.tokenizer.tgt.token_id(t) for t in tokens][:limit]
        return Hypothesis(ids, float(score), float(score))


def check_engine(cfg, paths: list[Path], constrained: bool = False) -> None:
    """What task.engine=ctranslate2 cannot do, refused before any work (`engine_refusal`), and a
    task.ct2_dir it cannot write."""
    refuse(engine_refusal(cfg, paths, constrained))
    if cfg.task.get("ct2_dir") is not None:
        given_root(cfg.task.ct2_dir)


def engine_refusal(cfg, paths: list[Path], constrained: bool = False) -> Refusal:
    """What task.engine=ctranslate2 cannot do for this run (Ct2Translator.capabilities), or None;
    `constrained`: the input carries constraints (decoding.constraints)."""
    import importlib.util

    declared = Ct2Translator.capabilities
    if importlib.util.find_spec("ctranslate2") is None:
        return "task.engine=ctranslate2 needs the ctranslate2 package: pip install -e '.[export]'"
    if len(paths) > 1 and not declared.ensembles:
        return ("task.engine=ctranslate2 decodes one checkpoint: an ensemble (ckpt_path=[a,b]) is ours "
                "(task.engine=ours)")
    if cfg.task.get("alignment") and not declared.alignments:
        return "task.alignment=true reads our model's cross-attention: it needs task.engine=ours"
    if constrained and not declared.constraints:
        return "decoding.constraints=true: task.engine=ctranslate2 has no constrained search; task.engine=ours"
    return None


def ct2_translator(path: Path, translator: Translator, device: torch.device, workers: Workers = SERIAL,
                   ct2_dir: str | None = None) -> Ct2Translator:
    """The Translator `translator` (its model, tokenizer, search, int8 rule and shortlist) decoded by
    CTranslate2, with as many decoders (inter_threads) and threads each (intra_threads) as `workers`;
    the conversion under task.ct2_dir (`ct2_dir`; None: ct2_root's rule)."""
    folder = converted(path, translator.models[0].cpu(), translator.tokenizer, translator.quantize, ct2_dir)
    return Ct2Translator(folder, translator.tokenizer, translator.search, translator.max_positions, device,
                         workers.inter, workers.intra or torch.get_num_threads(), translator.shortlist is not None)

