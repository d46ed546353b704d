"""task=score: forced decoding, the log-probability a checkpoint gives each target sentence for its
source (as fairseq's, sockeye's and marian-scorer's scoring do). One line per pair, in input order:

    SUM<TAB>NORMALIZED[<TAB>T1 T2 ... EOS]

SUM adds the log-probabilities of the target's tokens and its EOS (the model's log-softmax, no label
smoothing); NORMALIZED is SUM per token (EOS counted), or with task.normalize=true SUM normalized as
this command's `decoding` normalizes its hypotheses (beam: / length_norm(tokens + EOS); greedy and
sampling report the sum), so that it equals the score task=translate task.scores=true prints for
that translation. task.token_scores=true adds each token's log-probability. ckpt_path=[a,b,...]
scores with an ensemble (the members' probabilities averaged, decoding/ensemble.py). Pairs pass
the text rule of translate (data/text.py) and are batched by task.max_tokens; with quantize=int8
the int8 copy scores, as it translates.
"""

import logging
import math
from collections.abc import Callable

from hydra.utils import instantiate
from omegaconf import DictConfig

from transformer_mt.checkpoints.files import checkpoint_paths
from transformer_mt.checkpoints.loading import task_device
from transformer_mt.data.text import clean
from transformer_mt.decoding.strategy import Search
from transformer_mt.errors import DataError
from transformer_mt.inference.members import load_translator
from transformer_mt.inference.prefix import language_ids
from transformer_mt.inference.scoring import Ids, token_logprobs
from transformer_mt.inference.translator import Translator
from transformer_mt.progress import ProgressBar
from transformer_mt.tasks.lines.pairs import Pairs, read_pairs
from transformer_mt.tasks.lines.writing import open_output, output_refusal
from transformer_mt.validate import refuse

log = logging.getLogger(__name__)


def encode_checked(translator: Translator, pairs: Pairs, prefix: list[int], target_prefix: list[int] = ()
                   ) -> tuple[Ids, Ids]:
    """Token ids of the cleaned pairs (sources with `prefix` first and EOS last, targets with
    `target_prefix` first and without EOS), as training encodes them; a side longer than the model's
    (an ensemble's: the shortest member's) positions is a DataError naming its file and line."""
    src = translator.tokenizer.encode_sources(clean(pairs.src)[0], prefix)
    tgt = [[*target_prefix, *ids] for ids in translator.tokenizer.tgt.encode(clean(pairs.tgt)[0])]
    limit = translator.max_positions
    for i, (source, target) in enumerate(zip(src, tgt)):
        for side, n in (("source", len(source)), ("target", len(target) + 1)):
            if n > limit:
                raise DataError(f"{pairs.where(side, i)}: the {side} has {n} tokens (with EOS), more than the "
                                f"model takes, model.max_positions={limit}")
    return src, tgt


def normalizer(search: Search, normalize: bool) -> Callable[[int], float]:
    """What the second number divides the sum by, given the target's length (EOS counted): the
    length itself, or with `normalize` the search's length_norm (none for greedy and sampling,
    which report the sum)."""
    if not normalize:
        return float
    if not search.capabilities.beams:
        log.warning("%s does not normalize its scores: the second number is the sum, as task=translate reports it",
                    type(search).__name__)
        return lambda length: 1.0
    return search.length_norm


def score_line(logprobs: list[float], norm: Callable[[int], float], token_scores: bool, free: int = 0) -> str:
    """SUM<TAB>NORMALIZED[<TAB>token log-probabilities], six decimals; the first `free` tokens (a
    target language's code) count 0 in the sum, as a search counts them, and 1 in the length."""
    total = math.fsum(logprobs[free:])
    fields = [f"{total:.6f}", f"{total / norm(len(logprobs)):.6f}"]
    if token_scores:
        fields.append(" ".join(f"{value:.6f}" for value in logprobs[free:]))
    return "\t".join(fields) + "\n"


def run(cfg: DictConfig) -> None:
    options = cfg.task
    paths = checkpoint_paths(cfg)
    refuse(output_refusal(options.get("output")))
    pairs = read_pairs(options)  # read and checked whole: a bad line stops the run before the model loads
    # teacher-forced: over the whole vocabulary, whatever decoding.shortlist says (docs/decoding.md)
    translator = load_translator(paths, instantiate(cfg.decoding), cfg.quantize, shortlist=False,
                                 kernels=cfg.kernels).to(
        task_device(cfg.trainer))
    source, target = language_ids(translator.tokenizer, options.get("tag"), options.get("source_lang"),
                                  options.get("target_lang"))
    src, tgt = encode_checked(translator, pairs, source, target)
    norm = normalizer(translator.search, options.normalize)
    with ProgressBar("scoring", len(pairs), "pairs", cfg.get("progress")) as bar:
        scores = token_logprobs(translator, src, tgt, options.max_tokens, bar)
    with open_output(options.get("output")) as out:
        out.writelines(score_line(row, norm, options.token_scores, len(target)) for row in scores)
    log.info("scored %d pairs", len(scores))
