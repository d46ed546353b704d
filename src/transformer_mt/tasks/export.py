"""task=export: a checkpoint as a Hugging Face Marian folder (an M2M-100 one for a model of M2M-100's
family: interop/m2m100_export.py) or a CTranslate2 model directory.

    python run.py task=export ckpt_path=PATH task.format=hf [task.output=DIR] [decoding=beam ...]
    python run.py task=export ckpt_path=PATH task.format=ct2 quantize=int8 [task.output=DIR]

task.format=hf writes this command's `decoding` (greedy by default, as task=translate's; not the
checkpoint's training-time one) into generation_config.json: a plain `model.generate` searches as
`task=translate` with the same `decoding` (interop/marian.py: generation_options).

The folder is filled beside its destination and renamed into place when complete, so a refused
model or a failure leaves nothing half-written. `transformers` / `ctranslate2` come with the
`export` extra (`pip install -e ".[export]"`). A checkpoint with a lexical table beside it (task=shortlist)
exports it as the CTranslate2 folder's vocabulary map, vmap.txt (interop/ct2_vmap.py: translate_batch's
use_vmap=True reads it).
"""

import importlib.util
import logging
from pathlib import Path

from hydra.utils import instantiate
from omegaconf import DictConfig

from transformer_mt.atomic import atomic_dir
from transformer_mt.checkpoints.files import checkpoint_path
from transformer_mt.errors import ConfigError
from transformer_mt.inference.members import load_members
from transformer_mt.progress import ProgressBar
from transformer_mt.validate import refuse

log = logging.getLogger(__name__)

NEEDS = {"hf": "transformers", "ct2": "ctranslate2"}  # task.format (choices.EXPORT_FORMATS): its package


def weight_type(cfg: DictConfig) -> str:
    """The exported weights' type: task.quantization, else the top-level quantize (none or int8; none
    with task.format=hf, ExportTask.run_refusal)."""
    given = cfg.task.quantization
    return str(given if given is not None else cfg.quantize)


def run(cfg: DictConfig) -> dict:
    fmt, quantize = cfg.task.format, weight_type(cfg)
    if importlib.util.find_spec(NEEDS[fmt]) is None:
        raise ConfigError(f"task.format={fmt} needs the {NEEDS[fmt]} package: pip install -e '.[export]'")
    path = checkpoint_path(cfg)
    output = Path(cfg.task.output) if cfg.task.get("output") else Path(cfg.paths.output_dir) / fmt
    if output.exists() and (not output.is_dir() or any(output.iterdir())):
        raise ConfigError(f"task.output={output}: already exists; name a new folder")
    decoding = cfg.get("decoding") if fmt == "hf" else None
    if decoding is not None:
        from transformer_mt.interop.marian import generation_options

        generation_options(decoding)  # a decoding generate cannot express: refused before loading
        instantiate(decoding)  # and one our searches refuse (decoding.beam_size=0): refused there
    (model,), tokenizer, _ = load_members([path])
    with ProgressBar(f"exporting to {fmt}", None, "", cfg.get("progress")):
        if fmt == "hf" and model.config.positional == "fairseq":  # M2M-100's family (interop/m2m100.py)
            from transformer_mt.interop.m2m100_export import export_m2m100

            with atomic_dir(output) as tmp:
                export_m2m100(model, tokenizer, tmp, decoding)
        elif fmt == "hf":
            from transformer_mt.interop.marian import export_hf, marian_refusal

            refuse(marian_refusal(model.config))
            with atomic_dir(output) as tmp:
                export_hf(model, tokenizer, tmp, decoding)
        else:
            from transformer_mt.inference.shortlist_loading import table_beside
            from transformer_mt.interop.ct2_vmap import write_vmap
            from transformer_mt.interop.ctranslate2 import export_ct2

            table = table_beside(path, tokenizer)  # task=shortlist's, if the checkpoint has one: vmap.txt
            with atomic_dir(output) as tmp:
                export_ct2(model, tokenizer, tmp, quantize)
                if table is not None:
                    write_vmap(tmp, table, tokenizer)
    log.info("exported %s as %s to %s", path, fmt, output)
    print(output)
    return {"output": str(output), "format": fmt}
