"""task=shortlist: the lexical table that decoding.shortlist=true decodes with (Marian's extract_lex
and --shortlist, CTranslate2's vocabulary map), built once from a checkpoint's training corpus.

    python run.py task=shortlist ckpt_path=PATH [data=NAME] [task.candidates=K] [task.frequent=F]

The corpus is the one the checkpoint was trained on (data=checkpoint, the default, as task=evaluate
reads it: its recorded data config, read as this machine reads data) or data=NAME's, its training
split encoded with the checkpoint's own tokenizer (the cache's token ids, encoded now if missing) and
streamed a chunk at a time into co-occurrence counts (data/lexical.py). The table, each source
token's K best target tokens by task.scoring beyond the F most frequent target tokens, is written
atomically beside the checkpoint as CKPT_STEM.shortlist.json (checkpoints/shortlist_file.py), which
decoding.shortlist=true, task=export task.format=ct2 (vmap.txt) and task.engine=ctranslate2 read.
"""

import logging
from pathlib import Path

import numpy as np
from hydra.utils import instantiate
from omegaconf import DictConfig

from transformer_mt.checkpoints.files import checkpoint_path
from transformer_mt.checkpoints.loading import read_checkpoint
from transformer_mt.checkpoints.shortlist_file import shortlist_path, vocabulary_digest, write_shortlist
from transformer_mt.data.batching import flat_lists
from transformer_mt.data.lexical import Cooccurrence, LexicalTable, check_sizes, lexical_table
from transformer_mt.data.tokenizer import Vocabularies
from transformer_mt.errors import DataError
from transformer_mt.inference.members import checkpoint_vocabularies
from transformer_mt.progress import ProgressBar
from transformer_mt.tasks.evaluate import data_config

log = logging.getLogger(__name__)

CHUNK = 10_000  # sentence pairs counted at a time


def count_pairs(table, vocabularies: Vocabularies, progress: bool | None) -> Cooccurrence:
    """The co-occurrence counts of an encoded split (a datasets.Dataset of src_ids / tgt_ids), read
    CHUNK rows at a time; the special tokens are not counted."""
    ignored = np.array(sorted(set(vocabularies.special_ids().values())), dtype=np.int64)
    counts = Cooccurrence(vocabularies.src.vocab_size, vocabularies.tgt.vocab_size, ignored)
    rows = table.with_format("arrow")
    with ProgressBar("counting", len(table), "pairs", progress) as bar:
        for start in range(0, len(table), CHUNK):
            chunk = rows[start : start + CHUNK]
            counts.add(*flat_lists(chunk.column("src_ids")), *flat_lists(chunk.column("tgt_ids")))
            bar.advance(chunk.num_rows)
    return counts


def header(checkpoint: Path, vocabularies: Vocabularies, table: LexicalTable, options: DictConfig) -> dict:
    """What the file says of how its table was made."""
    return {"checkpoint": checkpoint.name, "vocabularies": vocabulary_digest(vocabularies.to_dict()),
            "scoring": options.scoring, "candidates": options.candidates, "frequent": options.frequent,
            "pairs": table.pairs}


def run(cfg: DictConfig) -> dict:
    options = cfg.task
    check_sizes(options.candidates, options.frequent, options.scoring)
    path = checkpoint_path(cfg)
    checkpoint = read_checkpoint(path)
    vocabularies = checkpoint_vocabularies(checkpoint, path)
    data = data_config(cfg, checkpoint["hyper_parameters"].get("data"), path)
    pairs = instantiate(data, vocabularies=vocabularies).token_ids("train")
    if len(pairs) == 0:
        raise DataError(f"ckpt_path={path}: its training split has no sentence pairs to count")
    table = lexical_table(count_pairs(pairs, vocabularies, cfg.get("progress")), options.candidates,
                          options.frequent, options.scoring)
    output = shortlist_path(path)
    listed = (table.candidates >= 0).sum(axis=1)  # each row's ids come first, then -1
    write_shortlist(output, header(path, vocabularies, table, options), table.frequent.tolist(),
                    (row[:n] for row, n in zip(table.candidates.tolist(), listed.tolist())))
    log.info("shortlist: %d pairs counted; %d frequent target tokens, %.1f candidates per source token on average "
             "(task.candidates=%d): %s", table.pairs, len(table.frequent), listed.mean(), options.candidates, output)
    print(output)
    return {"output": str(output), "pairs": table.pairs, "candidates": options.candidates,
            "frequent": options.frequent, "scoring": options.scoring}
