"""A token-ids cache entry (`ids-<key>/`) and the record that vouches for it.

An entry holds `ids.arrow` and `entry.json`, written last, with the row count and byte size of the
Arrow file. An entry is used only when the record is there and readable, the file has the recorded
size, opens as Arrow, has the expected columns and the recorded number of rows; anything else (a
disk that filled up, a copy cut short, a hand-edited file) makes it damaged, and the datamodule
encodes it again.
"""

import hashlib
import json
import os
import shutil
from pathlib import Path

import datasets

ARROW = "ids.arrow"


def digest(*parts) -> str:
    """A cache key: a short hash of `parts` (JSON, keys sorted)."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:20]


RECORD = "entry.json"


def write_record(folder: Path, rows: int) -> None:
    """Vouch for the finished `folder/ids.arrow` of `rows` rows."""
    size = (folder / ARROW).stat().st_size
    (folder / RECORD).write_text(json.dumps({"rows": rows, "bytes": size}) + "\n", encoding="utf-8")


def discard(folder: Path) -> None:
    """Remove a damaged entry: moved aside first (one process wins if several try), then deleted."""
    aside = folder.with_name(f".{folder.name}.damaged-{os.getpid()}")
    try:
        folder.rename(aside)
    except FileNotFoundError:
        return
    shutil.rmtree(aside, ignore_errors=True)


def read_record(folder: Path) -> dict:
    """The entry's record; ValueError saying what is wrong with it."""
    try:
        record = json.loads((folder / RECORD).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"no {RECORD}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"{RECORD} unreadable ({type(err).__name__})") from None
    if not isinstance(record, dict) or not all(isinstance(record.get(k), int) for k in ("rows", "bytes")):
        raise ValueError(f"{RECORD} has no row count and size")
    return record


def open_entry(folder: Path, features: datasets.Features) -> datasets.Dataset:
    """The entry's token ids, memory-mapped, after checking them against the record; ValueError
    saying why the entry is damaged."""
    record = read_record(folder)
    path = folder / ARROW
    size = path.stat().st_size if path.is_file() else None
    if size != record["bytes"]:
        raise ValueError(f"{ARROW} has {'no file' if size is None else f'{size} bytes'}, "
                         f"{RECORD} records {record['bytes']} bytes")
    try:
        dataset = datasets.Dataset.from_file(str(path))
    except Exception as err:  # pyarrow's errors for a file that is not (whole) Arrow
        raise ValueError(f"{ARROW} unreadable ({type(err).__name__})") from None
    if dataset.features != features:
        raise ValueError(f"{ARROW} has other columns than expected ({', '.join(dataset.features)})")
    if dataset.num_rows != record["rows"]:
        raise ValueError(f"{ARROW} has {dataset.num_rows} rows, {RECORD} records {record['rows']}")
    return dataset
