"""Lines of text translated: each line cleaned by the text rule (data/text.py), encoded, fitted to
the model (long_lines.py), batched by a token budget, decoded by an engine (engine.py: our
Translator or CTranslate2's) and written back as text, in input order; with target prefixes
(prefix.py) and Pharaoh alignments (pharaoh.py: an engine that declares them, a Translator, whose
first member they read). An empty line gives empty outputs. task=translate, the pipelines'
synthetic stage and any server translate through `translate_lines`."""

from dataclasses import dataclass

import torch

from transformer_mt.data.batching import Collator, TokenBudgetBatchSampler
from transformer_mt.data.text import clean
from transformer_mt.errors import DataError
from transformer_mt.inference.engine import Engine
from transformer_mt.inference.long_lines import LongLines
from transformer_mt.inference.pharaoh import Alignments
from transformer_mt.inference.prefix import prefix_ids, spell
from transformer_mt.inference.workers import SERIAL, Workers
from transformer_mt.progress import ProgressBar


@dataclass(frozen=True)
class Translation:
    """One output of a line: its text, its score, and with alignments its Pharaoh alignment."""

    text: str
    score: float
    alignment: str | None = None


NBest = list[Translation]


def translate_lines(translator: Engine, lines: list[str], max_tokens: int, first_line: int = 1,
                    bar: ProgressBar | None = None, name: str = "input", prefixes: list[str] | None = None,
                    alignments: Alignments | None = None, long_lines: LongLines | None = None,
                    source_prefix: list[int] | None = None, constraints: list[list[str]] | None = None,
                    workers: Workers = SERIAL, encoded: list[list[int]] | None = None, target_prefix: list[int] = ()
                    ) -> list[NBest]:
    """The n-best translations of each line, in order; an empty line gets n empty ones, score 0 (with
    a target prefix: the prefix), and so does a line longer than the model takes that `long_lines`
    skips (without the prefix; default rule: error). `prefixes`: one per line ("": none), which
    every output of the line starts with (prefix.py). `bar` advances by the lines of each batch as
    it is translated. Errors name `name:LINE`, LINE counted from `first_line`. `source_prefix`: ids
    put before every source (a tag's); `target_prefix`: before every output (a target code: counted
    0, dropped from the text). `constraints`: each line's phrases, which every output of the line
    contains ([] for none). `workers`: the decoders the batches are shared among (in input order;
    with alignments, constraints or a `random` search, one after another: order matters). `encoded`:
    each line's source ids made already (a server's request: tokenized once)."""
    cleaned, starts = clean(lines)[0], clean(prefixes)[0] if prefixes is not None else [""] * len(lines)
    todo = [i for i, line in enumerate(cleaned) if line]
    n, empty, max_positions = translator.search.nbest, "" if alignments else None, translator.max_positions
    results: list[NBest] = [[Translation(start, 0.0, empty)] * n for start in starts]
    src = fitted_sources(translator, [cleaned[i] for i in todo], max_positions,
                         [f"{name}:{first_line + i}" for i in todo], long_lines or LongLines(), source_prefix or [],
                         None if encoded is None else [encoded[i] for i in todo])
    for i in (i for i, ids in zip(todo, src) if ids is None):  # skipped: as an empty line, without the prefix
        results[i] = [Translation("", 0.0, empty)] * n
    todo, src = [i for i, ids in zip(todo, src) if ids is not None], [ids for ids in src if ids is not None]
    if bar is not None:
        bar.advance(len(lines) - len(todo))
    if not todo:
        return results
    forced = forced_tokens(translator, None if prefixes is None else [starts[i] for i in todo], name,
                           [first_line + i for i in todo], list(target_prefix))
    phrases = None if constraints is None else constraint_ids(translator, [constraints[i] for i in todo], name,
                                                              [first_line + i for i in todo])
    collate = Collator(translator.pad_id, translator.bos_id, translator.eos_id)

    def decode(batch: list[int]) -> list[NBest]:
        padded = collate.pad([src[j] for j in batch]).to(translator.device)
        return translate_batch(translator, padded, [cleaned[todo[j]] for j in batch],
                               [starts[todo[j]] for j in batch], [forced[j] for j in batch], alignments,
                               None if phrases is None else [phrases[j] for j in batch], len(target_prefix))

    batches = list(TokenBudgetBatchSampler([len(s) for s in src], max(max_tokens, max(map(len, src))), shuffle=False))
    ordered = alignments is not None or phrases is not None or translator.search.capabilities.random
    for batch, nbests in zip(batches, (SERIAL if ordered else workers).map(decode, batches)):
        for j, nbest in zip(batch, nbests):
            results[todo[j]] = nbest
        if bar is not None:
            bar.advance(len(batch))
    return results


def forced_tokens(translator: Engine, starts: list[str] | None, name: str, lines: list[int],
                  target_prefix: list[int]) -> list[list[int]]:
    """The ids each line's outputs start with: `target_prefix`, then its cleaned prefix's (None: no
    prefixes; a bad one is a DataError naming `name:LINE`)."""
    most = translator.max_positions - 2 - len(target_prefix)
    ids = [[] for _ in lines] if starts is None else prefix_ids(translator.tokenizer.tgt, starts, most, name, lines)
    return [[*target_prefix, *row] for row in ids]


def fitted_sources(translator: Engine, lines: list[str], max_positions: int, places: list[str],
                   long_lines: LongLines, prefix: list[int], encoded: list[list[int]] | None = None
                   ) -> list[list[int] | None]:
    """The ids (`prefix` first, EOS last) of each cleaned, non-empty line as the model will see them
    (`encoded`: made already), by the rule for lines longer than it takes (long_lines.py: None for a
    skipped line)."""
    if not lines:
        return []
    src = encoded if encoded is not None else translator.tokenizer.encode_sources(lines, prefix)
    return long_lines.fit(src, max_positions, translator.tokenizer.src.special_ids["eos_id"], places)


def constraint_ids(translator: Engine, constraints: list[list[str]], name: str, lines: list[int]
                   ) -> list[list[tuple[int, ...]]]:
    """Each line's constraint phrases as target ids (the model's tokenizer, cleaned by the text
    rule); a phrase with no token is a DataError naming `name:LINE`."""
    flat = clean([phrase for phrases in constraints for phrase in phrases])[0]
    ids = iter(translator.tokenizer.tgt.encode(flat) if flat else [])
    out = []
    for phrases, line in zip(constraints, lines):
        row = [tuple(next(ids)) for _ in phrases]
        if any(not phrase for phrase in row):
            raise DataError(f"{name}:{line}: an empty constraint (source<TAB>phrase<TAB>..., each phrase some text)")
        out.append(row)
    return out


def translate_batch(translator: Engine, src: torch.Tensor, lines: list[str], prefixes: list[str],
                    forced: list[list[int]], alignments: Alignments | None,
                    constraints: list[list[tuple[int, ...]]] | None = None, free_prefix: int = 0) -> list[NBest]:
    """The n-best of each row of src (B, S), the padded ids of the cleaned `lines`; every output of
    a row starts with its prefix (text, and the ids `forced`; "" and []: none) and contains its
    `constraints` (None: none); the first `free_prefix` forced ids count 0 (a target language's code)."""
    collate = Collator(translator.pad_id, translator.bos_id, translator.eos_id)
    prefix_tokens = collate.pad(forced) if any(forced) else None
    hyps = translator.hypotheses(src, prefix_tokens=prefix_tokens, constraints=constraints, free_prefix=free_prefix)
    flat = [(row, h) for row, nbest in enumerate(hyps) for h in nbest]
    outputs, rows = [h.tokens for _, h in flat], [row for row, _ in flat]

    def texts(sequences: list[list[int]], owners: list[int]) -> list[str]:
        """The text of token sequences (the first tokens of outputs[owners[i]]), as it is written."""
        return spell(translator.tokenizer.tgt, sequences, [prefixes[rows[o]] for o in owners],
                     [len(forced[rows[o]]) for o in owners])

    written = texts(outputs, list(range(len(outputs))))
    marks = [None] * len(flat)
    if alignments is not None:
        marks = alignments(translator.members()[0], translator.tokenizer, src, lines, outputs, rows, texts)
    out: list[NBest] = [[] for _ in hyps]
    for (row, h), text, mark in zip(flat, written, marks):
        out[row].append(Translation(text, h.score, mark))
    return out
