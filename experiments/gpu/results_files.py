"""results.json and results.md of experiments/gpu/run.py: the steps' figures as Markdown tables,
the machine's folders scrubbed from both, and the steps of several results.json files merged into
one. Only the standard library, as run.py, and the project's stdlib-only table writer
(src/transformer_mt/markdown.py), read from its file while the project is not installed yet: run.py
imports this before its install step, and a failed install must still leave results.md."""

import importlib.util
import json
import re
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

try:
    from transformer_mt.markdown import markdown_table
except ImportError:  # a fresh machine, before (or without) run.py's install step
    _spec = importlib.util.spec_from_file_location("_markdown", ROOT / "src" / "transformer_mt" / "markdown.py")
    _markdown = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_markdown)
    markdown_table = _markdown.markdown_table


def number(value, digits: int = 2) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.{digits}f}" if abs(value) >= 0.01 or value == 0 else f"{value:.2e}"
    return str(value).replace("|", "/").replace("\n", " ")


def table(rows: list[dict], columns: list[str] | None = None) -> list[str]:
    """Rows of dicts as a Markdown table (columns: the union of their keys but nested values)."""
    if not rows:
        return []
    columns = columns or list(dict.fromkeys(k for r in rows for k, v in r.items() if not isinstance(v, dict | list)))
    return markdown_table(columns, [[number(r.get(c)) for c in columns] for r in rows]).split("\n")


def benchmark_tables(steps: dict) -> list[str]:
    """The tables of the loss_speed and attention_speed steps."""
    out = []
    loss = steps.get("loss_speed", {}).get("figures")
    if loss:
        out += ["", "## Output layer + loss, forward + backward (`loss_speed.py`)", "",
                f"{loss['rows']:,} rows x vocabulary {loss['vocab']:,}, {loss['precision']}; median of {loss['reps']}; "
                "diffs against the plain fp32 loss (loss per token; gradients over their largest value).", ""]
        out += table([{"d": w["d"], "system": s["system"], "status": s["status"], "ms": s.get("ms"),
                       "previous / this": s.get("speedup_vs_previous"), "peak GB": s.get("peak_gb"),
                       "loss diff": s.get("loss_diff"), "grad diff": s.get("grad_rel_diff"),
                       "first pass s": s.get("first_pass_s"), "note": s.get("note")}
                      for w in loss["widths"] for s in w["systems"]])
    attention = steps.get("attention_speed", {}).get("figures")
    if attention:
        out += ["", "## Attention, padded against packed, forward + backward (`attention_speed.py`)", "",
                f"{len(attention['batches'])} batches of {attention['max_tokens']:,} tokens, "
                f"{attention['heads']} heads x {attention['d_k']}, {attention['dtype']}; ms per batch; "
                "padding: of the score entries.", ""]
        out += table([{"attention": kind, "padded kernel": f["padded_backend"], "packed kernel": f["packed_kernel"],
                       "padded ms": f["padded_ms"], "packed ms": f["packed_ms"],
                       "padded / packed": f["padded_over_packed"], "padding %": 100 * f["padding"],
                       "max diff out": f["out_max_abs_diff"], "max diff grad": f["grad_max_abs_diff"]}
                      for kind, f in attention["kinds"].items()])
    backends = steps.get("attention_backends", {}).get("figures")
    if backends:
        out += ["", "## Attention backends on the shape grid, forward + backward (`attention_speed.py --backends`)", "",
                f"{len(backends['shapes'])} shapes of {backends['max_tokens']:,}-token batches, {backends['heads']} "
                f"heads x {backends['d_k']}, {backends['dtype']}; ms per batch: the first pass over the shapes "
                f"(plans built), then the median of {backends['reps']}.", ""]
        out += table([{"attention": kind, "backend": name, "first pass ms": f.get("first_ms"), "ms": f.get("ms"),
                       "cannot run": f.get("error")} for kind, named in backends["kinds"].items()
                      for name, f in named.items()])
    return out


def first_line(step: dict) -> str:
    text = step.get("error") or step.get("note") or ""
    return text.splitlines()[0] if text else ""


def markdown(results: dict) -> str:
    meta, steps = results["meta"], results["steps"]
    out = [f"# GPU run: {meta['date']}", "",
           f"{meta.get('gpu') or 'CPU'}, torch {meta.get('torch')}, CUDA {meta.get('cuda')}, "
           f"python {meta.get('python')}{', smoke sizes' if meta['smoke'] else ''}; `{meta['command']}`", "",
           "## Steps", ""]
    out += table([{"step": n, "status": s["status"], "seconds": s.get("seconds"), "error": first_line(s)}
                  for n, s in steps.items()])
    speed = [(n, s["figures"]) for n, s in steps.items()
             if n.startswith("train_speed/") and s["figures"].get("systems")]
    if speed:
        out += ["", "## Training throughput (`train_speed.py`)", ""]
        out += table([{"model": f["model"], "system": s["system"], "compile": s["compile"],
                       "mode": s.get("compile_mode"), "shapes": s.get("shape_grid"),
                       "packed": s.get("packed", False), "precision": f["precision"],
                       "tokens/batch": f["max_tokens"], "target tok/s": round(s["target_tokens_per_s"]),
                       "src+tgt tok/s": round(s["tokens_per_s"]), "step ms": s["step_ms"],
                       "max step ms": s["step_ms_max"], "TFLOP/s": s["tflops"], "MFU %": 100 * s["mfu"],
                       "peak GPU GB": s["peak_memory_gb"], "padding %": 100 * s["padding"],
                       "warm-up s": s["warmup_s"], "graphs": s.get("graphs")} for _, f in speed for s in f["systems"]])
        out += ["", f"MFU against {speed[0][1]['peak_tflops']:.3g} TFLOP/s ({speed[0][1]['peak_source']}); "
                "warm-up s: the untimed first steps, compilation included (on a shape grid: until every shape has "
                "come once); graphs: those torch.compile made; shapes: data.shape_grid.", "",
                "## Attention kernels (first training batch; packed: varlen or reference)", ""]
        out += table([{"run": n.removeprefix("train_speed/"), "attention": kind, **call}
                      for n, f in speed for kind, call in f["attention"].items()],
                     ["run", "attention", "backend", "dtype", "q", "k", "mask", "is_causal", "dropout_p"])
        profiles = [(n, s["profile"]) for n, f in speed for s in f["systems"] if s.get("profile")]
        if profiles:
            out += ["", "## Where a step's time goes (`--profile-steps`, ms per step)", ""]
            out += table([{"run": n.removeprefix("train_speed/"), "basis": p["basis"], "steps": p["steps"],
                           "wall": p["wall_ms_per_step"], **p["ms_per_step"]} for n, p in profiles])
    out += benchmark_tables(steps)
    runs = [(n, s["figures"]) for n, s in steps.items() if n in ("toy", "multi30k", "evaluate") and s["figures"]]
    if runs:
        keys = ["test/bleu", "test/bleu_tok_lc", "reproduced", "val/bleu_best", "tokens_per_sec", "train_seconds",
                "steps", "epochs", "num_parameters", "train/mfu (mean, 2nd half)", "train/tflops (mean, 2nd half)",
                "train/gpu_mem_gb (mean, 2nd half)"]
        out += ["", "## Training runs", "", *table([{"run": n, **f} for n, f in runs], ["run", *keys])]
    decoded = steps.get("decode", {}).get("figures")
    if decoded:
        out += ["", "## Decoding (`decode_speed.py`)", ""]
        for key, value in decoded.items():
            if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
                out += [f"{key}:", "", *table(value), ""]
            elif isinstance(value, dict) and value:  # the peers that could not run, with their errors
                out.append(f"- {key}: " + "; ".join(f"{k}: {number(v)}" for k, v in value.items()))
            elif not isinstance(value, dict | list):
                out.append(f"- {key}: {number(value)}")
    return "\n".join(out) + "\n"


def scrub(value, out: Path):
    """`value` (JSON data) with the machine's folders made generic, so that the files can be committed:
    the project root dropped from paths, the temporary work folder as $WORK, --out as $OUT."""
    if isinstance(value, dict):
        return {k: scrub(v, out) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub(v, out) for v in value]
    if not isinstance(value, str):
        return value
    value = re.sub(re.escape(tempfile.gettempdir()) + r"/gpu-run-[^/\s]+", "$WORK", value)
    return value.replace(str(out), "$OUT").replace(f"{ROOT}/", "")


def save(out: Path, meta: dict, steps: dict) -> list[str]:
    """results.json and results.md as the steps stand (machine folders scrubbed); the failed steps."""
    failed = [name for name, step in steps.items() if step["status"] == "failed"]
    results = scrub({"meta": meta, "failed": failed, "steps": steps}, out)
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    (out / "results.md").write_text(markdown(results))
    return failed



def recompiles(log_text: str) -> list[str]:
    """The recompilations torch's `recompiles` log reports: for each, the function and the first
    guard that failed (`compiled_encoder_layer: 0/0: 2 <= args[1].size()[0]`)."""
    found, lines = [], log_text.splitlines()
    for i, line in enumerate(lines):
        function = re.search(r"Recompiling function (\S+)", line)
        if function:
            guards = (re.search(r"\s- (\d+/\d+: .*?)(\s+#.*)?$", later) for later in lines[i + 1:i + 4])
            reason = next((g.group(1) for g in guards if g), "")
            found.append(f"{function.group(1)}: {reason}")
    return found


def read_recompiles(step: dict, log: Path) -> None:
    """A compiled step's recompilations from its log, on its figures (or, without figures, on the step)."""
    if "--compile" in step.get("command", "") and log.is_file():
        (step["figures"] if step["figures"] else step)["recompiles"] = recompiles(log.read_text(errors="replace"))


def merged(files: list[Path]) -> tuple[dict, dict]:
    """The meta and steps of several results.json files in one (a later file's step replaces an earlier
    one's); a compiled step's recompilations read again from its log beside its results.json, where it
    is (a step cut short from outside never had them read)."""
    parts = [json.loads(f.read_text()) for f in files]
    for f, part in zip(files, parts):
        for name, step in part["steps"].items():
            if name.startswith("train_speed/"):
                read_recompiles(step, f.parent / "logs" / f"{name.replace('/', '_')}.log")
    steps = {name: step for part in parts for name, step in part["steps"].items()}
    meta = {**parts[0]["meta"], "command": " + ".join(p["meta"]["command"] for p in parts),
            "date": " / ".join(dict.fromkeys(p["meta"]["date"] for p in parts))}
    return meta, steps
