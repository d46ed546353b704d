"""What every benchmark script's result says of the machine, and how it is given: a Markdown table
on stdout and, with --json, the result as JSON."""

import json
from pathlib import Path

import torch


def machine(device: torch.device) -> dict:
    """The device's name, torch's version and the CPU threads: the fields every result carries."""
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    return {"device_name": name, "torch": torch.__version__, "threads": torch.get_num_threads()}


def emit(result: dict, text: str, json_path: Path | None) -> None:
    """Print `text` (the result as Markdown) and write `result` to `json_path` when given."""
    print(text)
    if json_path:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(result, indent=2) + "\n")
