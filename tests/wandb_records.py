"""Reads an offline wandb run's transaction log (run-ID.wandb): wandb writes it in LevelDB's log
format (32 KiB blocks of records: crc32, length, type, data) after a 7-byte header, each record a
`wandb_internal_pb2.Record`. wandb has no public reader for it since its Go core replaced the
Python one, and offline runs keep their summary and config only there."""

import struct
from pathlib import Path

from wandb.proto import wandb_internal_pb2

BLOCK, HEADER, FILE_HEADER = 32768, 7, 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def records(path: Path) -> list:
    data = path.read_bytes()
    assert data[:4] == b":W&B", f"{path} is not a wandb transaction log"
    out, pending, pos = [], b"", FILE_HEADER
    while pos + HEADER <= len(data):
        left = BLOCK - pos % BLOCK
        if left < HEADER:  # block trailer: padding
            pos += left
            continue
        _, length, kind = struct.unpack("<IHB", data[pos:pos + HEADER])
        chunk = data[pos + HEADER:pos + HEADER + length]
        pos += HEADER + length
        if kind == 0 and length == 0:
            pos += BLOCK - pos % BLOCK if pos % BLOCK else 0
            continue
        pending = chunk if kind in (FULL, FIRST) else pending + chunk
        if kind in (FULL, LAST):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            out.append(record)
    return out


def summary(path: Path) -> dict[str, str]:
    """The run's summary as {key: JSON text}, later updates winning."""
    values = {}
    for record in records(path):
        if record.WhichOneof("record_type") == "summary":
            values.update({item.key or "/".join(item.nested_key): item.value_json for item in record.summary.update})
    return values


def run_record(path: Path):
    """The run record (name, group, tags)."""
    return next(r.run for r in records(path) if r.WhichOneof("record_type") == "run")
