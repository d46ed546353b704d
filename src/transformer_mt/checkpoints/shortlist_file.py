"""The lexical table of a checkpoint (decoding.shortlist), a JSON file beside it: `CKPT_STEM.shortlist.json`,
written whole or not at all by task=shortlist, read and checked by whoever decodes with it. Without
torch: the tasks check that it is there before any work (tasks/runs/preflight.py).

The file: a header (kind, version, the checkpoint's name, the digest of its vocabularies, how it was
built: scoring, candidates K, frequent F, the pairs counted), `frequent_ids` (the F most frequent
target ids), and `table`, one line per source id: its candidate target ids, best first."""

import hashlib
import json
from collections.abc import Iterable
from itertools import chain
from pathlib import Path

from transformer_mt.atomic import atomic_file
from transformer_mt.errors import DataError

KIND, VERSION = "transformer-mt shortlist", 1


def shortlist_path(checkpoint: Path) -> Path:
    """Where the lexical table of `checkpoint` lies: beside it, CKPT_STEM.shortlist.json."""
    return checkpoint.with_name(f"{checkpoint.stem}.shortlist.json")


def build_command(checkpoint: Path) -> str:
    """The command that builds the table of `checkpoint`."""
    return f"python run.py task=shortlist ckpt_path={checkpoint}"


def check_shortlist_exists(checkpoint: Path) -> Path:
    """The table's path, or the one line of a missing table: the key, the file and the command."""
    path = shortlist_path(checkpoint)
    if not path.is_file():
        raise DataError(f"decoding.shortlist=true: {checkpoint} has no lexical table ({path}); build it with "
                          f"{build_command(checkpoint)}")
    return path


def vocabulary_digest(vocabularies: dict) -> str:
    """A digest of a checkpoint's vocabularies (their plain data, `Vocabularies.to_dict()`)."""
    return hashlib.sha256(json.dumps(vocabularies, sort_keys=True).encode()).hexdigest()[:20]


def write_shortlist(path: Path, header: dict, frequent: list[int], table: Iterable[list[int]]) -> None:
    """The table file, atomically: `header`, then the frequent ids, then one line per source id."""
    head = {"kind": KIND, "version": VERSION, **header, "frequent_ids": frequent}
    lines = [f"{json.dumps(key)}: {json.dumps(value)}" for key, value in head.items()]
    rows = ",\n".join(json.dumps(row) for row in table)
    with atomic_file(path) as tmp:
        tmp.write_text("{\n" + ",\n".join(lines) + ',\n"table": [\n' + rows + "\n]\n}\n", encoding="utf-8")


def read_shortlist(path: Path, checkpoint: Path, digest: str, src_size: int, tgt_size: int) -> dict:
    """The table of `checkpoint` at `path`, checked whole: one line naming the file and the command
    that builds it again when it is damaged, of another kind, or built for other vocabularies."""
    again = f"; build it again: {build_command(checkpoint)}"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise DataError(f"{path}: not a readable lexical table ({' '.join(str(err).split())[:120]}){again}") \
            from None
    if not isinstance(data, dict) or data.get("kind") != KIND or data.get("version") != VERSION:
        raise DataError(f"{path}: not a lexical table of this version ({KIND}, version {VERSION}){again}")
    if data.get("vocabularies") != digest:
        raise DataError(f"{path}: built for other vocabularies than {checkpoint}'s{again}")
    table, frequent = data.get("table"), data.get("frequent_ids")
    if not isinstance(table, list) or len(table) != src_size or not all(isinstance(row, list) for row in table):
        raise DataError(f"{path}: its table must hold one list per source token ({src_size}){again}")
    ids = chain(frequent if isinstance(frequent, list) else [None], *table)
    if not all(type(i) is int and 0 <= i < tgt_size for i in ids):
        raise DataError(f"{path}: it holds ids that are no target token ids (0 to {tgt_size - 1}){again}")
    return data
