"""What decode_speed.py times: our searches and the peers (HF `generate`, CTranslate2) on the same batches, and
its other --what modes: the KV cache, an ensemble, a vocabulary shortlist, two checkpoints."""

import copy
import importlib.util
import re
import shutil
import sys
import tempfile
from collections.abc import Callable
from functools import partial
from operator import itemgetter
from pathlib import Path

import harness
import sacrebleu
import torch

from transformer_mt.data.batching import Collator
from transformer_mt.decoding import BeamSearch, GreedySearch, PowerLength, SearchOptions
from transformer_mt.decoding.ensemble import Ensemble
from transformer_mt.decoding.search import max_lengths
from transformer_mt.inference.members import load_translator
from transformer_mt.inference.workers import SERIAL, Workers
from transformer_mt.interop.ctranslate2 import export_ct2
from transformer_mt.interop.marian import export_hf
from transformer_mt.markdown import markdown_table
from transformer_mt.model.attention import kernels
from transformer_mt.model.quantize import on_kernels, quantize_int8
from transformer_mt.model.static_step import StaticDecoder

THREADS = 2  # on the CPU
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
NAMES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}  # also CTranslate2's compute_type
SECONDS = itemgetter(0)  # of a result of harness.timed


def workers(args, device: str) -> Workers:
    """Ours' decoders on the CPU: --inter x --intra (None: inference/workers.py's defaults)."""
    return Workers.for_device(args.inter, args.intra, torch.device(device), THREADS)


def describe(args, device: str, decoders: Workers) -> str:
    return "CUDA" if device != "cpu" else (f"ours {decoders.describe()}, kernels={args.kernels}; CTranslate2 "
                                           f"inter_threads={args.ct2_inter}, intra_threads={args.ct2_intra}")


def loaded(args, decoding=None) -> tuple:
    """--ckpt as a Translator (`decoding`: its search); --source's first --limit lines, else made-up ones (500)."""
    module = load_translator([Path(args.ckpt)], decoding)
    print(f"checkpoint: {args.ckpt} ({module.models[0].num_parameters():,} parameters); sentences: "
          f"{args.source or 'made-up'}\n")
    if args.source:
        return module, Path(args.source).read_text(encoding="utf-8").splitlines()[: args.limit]
    return module, harness.sentences(args.limit or 500, 4, 16)


def batches(items: list, size: int) -> list[list]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def ours(module, model, src: list[list[int]], search, device: str, batch: int = 64, decoders: Workers = SERIAL
         ) -> list[list[int]]:
    """Our search's best output of each sentence, the batches shared among the `decoders`."""
    collate = Collator(module.pad_id, module.bos_id, module.eos_id)

    def one(chunk: list[list[int]]) -> list[list[int]]:
        return [n[0].tokens for n in search(model, collate.pad(chunk).to(device), module.bos_id, module.eos_id)]

    return [tokens for out in decoders.map(one, batches(src, batch)) for tokens in out]


def our_systems(model, mine: str, device: str, dtype: str, chosen) -> dict:
    """Ours by name: fp32 on the `chosen` kernels and int8 on a CPU, the compiled static step too on a GPU."""
    systems = {mine: copy.deepcopy(model).to(device=device, dtype=DTYPES[dtype])}
    if device == "cpu":
        systems[mine] = on_kernels(systems[mine], chosen) if dtype == "fp32" else systems[mine]
        systems["ours int8"] = quantize_int8(model, chosen)
    else:
        systems[f"{mine} static"] = StaticDecoder(systems[mine], mode="reduce-overhead")
    return systems


def hf_translator(folder: Path, module, args):
    import transformers

    model = transformers.MarianMTModel.from_pretrained(folder).to(device=args.device, dtype=DTYPES[args.dtype]).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    eos, pad_id = model.config.eos_token_id, model.config.pad_token_id

    def translate(lines: list[str], beams: int) -> list[list[int]]:
        out = []
        for chunk in batches(lines, args.batch):
            enc = tokenizer(chunk, return_tensors="pt", padding=True).to(args.device)
            limit = int(max_lengths(enc["input_ids"].cpu(), pad_id, 1.2, 10, module.max_positions).max())
            with torch.no_grad(), kernels(torch.device(args.device)):  # our SDPA kernels (no cuDNN on a GPU)
                rows = model.generate(**enc, num_beams=beams, length_penalty=args.length_penalty, early_stopping=True,
                                      do_sample=False, max_new_tokens=limit + 1).tolist()
            for row in rows:
                row = row[1:]
                out.append(row[: row.index(eos)] if eos in row else [t for t in row if t != pad_id])
        return out

    return translate


def ct2_translator(folder: Path, module, args):
    """The export's type on a CPU, `dtype` on CUDA; --ct2-inter > 1: batches given from as many threads."""
    import ctranslate2

    compute_type = NAMES[args.dtype] if args.device == "cuda" else "default"
    translator = ctranslate2.Translator(str(folder), device=args.device, compute_type=compute_type,
                                        inter_threads=args.ct2_inter, intra_threads=args.ct2_intra)
    vocab = module.tokenizer
    collate = Collator(module.pad_id, module.bos_id, module.eos_id)

    def translate(lines: list[str], beams: int) -> list[list[int]]:
        def one(chunk: list[str]) -> list[list[int]]:  # our batches, each with the limit of its longest source
            ids = vocab.encode_sources(chunk)
            limit = int(max_lengths(collate.pad(ids), module.pad_id, 1.2, 10, module.max_positions).max())
            results = translator.translate_batch([vocab.src.tokens(i[:-1]) for i in ids], beam_size=beams,
                                                 length_penalty=args.length_penalty, max_batch_size=args.batch,
                                                 max_decoding_length=limit + 1)
            return [[vocab.tgt.token_id(t) for t in r.hypotheses[0]] for r in results]

        with Workers(args.ct2_inter) as threads:
            return [ids for out in threads.map(one, batches(lines, args.batch)) for ids in out]

    return translate


def peers(module, folder: Path, args, lines: list[str]) -> tuple[list[tuple[str, Callable]], dict[str, str]]:
    """Each installed peer exported into `folder`, kept if it translates two lines, else skipped with why."""
    ct2 = f"CTranslate2 {NAMES[args.dtype] if args.device == 'cuda' else 'float32'}"
    made, kept, skipped, only = [], [], {}, args.only
    if importlib.util.find_spec("transformers") and (only is None or "HF generate" in only):
        export_hf(module.models[0], module.tokenizer, folder / "hf")
        made.append(("HF generate", partial(hf_translator, folder / "hf", module, args)))
    if importlib.util.find_spec("ctranslate2"):
        for name, quantization in ((ct2, "none"), *((("CTranslate2 int8", "int8"),) if args.device == "cpu" else ())):
            if only is None or name in only:
                export_ct2(module.models[0], module.tokenizer, folder / name, quantization)
                made.append((name, partial(ct2_translator, folder / name, module, args)))
    for name, make in made:
        try:
            translate = make()
            translate(lines[:2], 1)
        except Exception as error:  # noqa: BLE001 - any failure of a peer's library is reported, not raised
            skipped[name] = (f"{type(error).__name__}: {error}".splitlines() or [""])[0]
            continue
        kept.append((name, translate))
    return kept, skipped


def cache_tables(args) -> dict:
    """Greedy and beam 4 with and without the KV cache, then every output forced to 50 tokens (200 lines)."""
    module, lines = loaded(args)
    src, model = module.tokenizer.encode_sources(lines), module.models[0].to(args.device, DTYPES[args.dtype])
    rows, forced = [], []

    def both(make, sentences: list, **options) -> dict:  # the seconds and outputs with the cache and without
        return {cache: harness.timed(partial(ours, module, model, sentences, make(options=SearchOptions(
            use_cache=cache, **options)), args.device), args.device) for cache in (True, False)}

    for name, make in (("greedy", GreedySearch), ("beam 4", partial(BeamSearch, 4))):
        runs = both(partial(make, length_norm=PowerLength(0.6)) if name == "beam 4" else make, src)
        rows += [{"search": name, "cache": cache, "sentences_per_s": len(src) / seconds,
                  "tokens_per_s": sum(len(o) + 1 for o in out) / seconds, "seconds": seconds,
                  "same_output_as_cached": None if cache else out == runs[True][1]}
                 for cache, (seconds, out) in runs.items()]
        (cached, out), (uncached, _) = both(make, src[:200], max_len_a=0, max_len_b=50, min_len=50).values()
        tokens = sum(len(o) + 1 for o in out)
        forced.append({"search": name, "tokens_per_s_cache": tokens / cached,
                       "tokens_per_s_no_cache": tokens / uncached, "speed_up": uncached / cached})
    print(markdown_table(["search", "cache", "sentences/s", "tokens/s", "seconds", "same output as cached"], [
        [r["search"], "yes" if r["cache"] else "no", f"{r['sentences_per_s']:.1f}", f"{r['tokens_per_s']:.0f}",
         f"{r['seconds']:.1f}", "-" if r["cache"] else r["same_output_as_cached"]] for r in rows], right=(2, 3, 4)))
    print(f"\nEvery output forced to 50 tokens ({len(src[:200])} sentences):\n")
    print(markdown_table(["search", "tokens/s with cache", "tokens/s without", "cache speed-up"], [
        [r["search"], f"{r['tokens_per_s_cache']:.0f}", f"{r['tokens_per_s_no_cache']:.0f}", f"{r['speed_up']:.2f}x"]
        for r in forced], right=(1, 2, 3)))
    return {"cache": rows, "forced_50_tokens": forced}


def ensemble(args) -> dict:
    """The checkpoint alone and as both members of an ensemble, greedy and beam 4, taking turns: best times."""
    (module, lines), repeat = loaded(args), args.repeat
    src = sorted(module.tokenizer.encode_sources(lines), key=len)
    systems = {"one model": module.models[0], "ensemble of two": Ensemble([module.models[0], module.models[0]])}
    searches = {"greedy": GreedySearch(), "beam 4": BeamSearch(4, PowerLength(1.0))}
    runs = {(s, m): partial(harness.timed, partial(ours, module, systems[m], src, searches[s], "cpu"))
            for s in searches for m in systems}
    best = {key: timed[0] for key, timed in harness.best(harness.rounds(runs, repeat, "ensemble"), SECONDS).items()}
    print(f"{len(lines)} sentences, {harness.described(harness.machine())}, best of {repeat} rounds\n")
    rows = [{"search": s, "system": m, "seconds": best[s, m], "ratio": best[s, m] / best[s, "one model"]}
            for s, m in best]
    print(markdown_table(["search", "system", "seconds", "sentences/s", "ensemble / one"],
                         [[r["search"], r["system"], f"{r['seconds']:.2f}", f"{len(lines) / r['seconds']:.0f}",
                           f"{r['ratio']:.2f}"] for r in rows], right=(2, 3, 4)))
    return {"sentences": len(lines), "rows": rows}


SHORTLIST = ("fp32", "fp32 shortlist", "int8", "int8 shortlist")
SHORTLIST_PAIRS = (("fp32 shortlist", "fp32"), ("int8 shortlist", "int8"))  # (with, without): x > 1, it is faster


def translate_process(args, source, output: Path, run_dir: Path, *overrides: str, ckpt=None) -> tuple[float, float]:
    """task=translate of `source` in a process (--run-py; `overrides`, then --'s): the seconds and lines/s logged."""
    shutil.rmtree(run_dir, ignore_errors=True)
    harness.in_process([sys.executable, str(args.run_py), "task=translate", f"ckpt_path={ckpt or args.ckpt}",
                        f"task.input={source}", f"task.output={output}", *overrides, *args.overrides,
                        f"hydra.run.dir={run_dir}"])
    log = (run_dir / "run.log").read_text(encoding="utf-8")
    return tuple(map(float, re.findall(r"translated \d+ lines in ([\d.]+) s \(([\d.]+) lines/s\)", log)[-1]))


def translation_run(args, ckpt, folder: Path, name: str, *overrides: str) -> dict:
    """task=translate of --source with `overrides` in a process of its own: its seconds and BLEU (--reference)."""
    output = folder / f"{name.replace(' ', '_')}.txt"
    seconds, _ = translate_process(args, args.source, output, folder / f"run_{output.stem}", *overrides, ckpt=ckpt)
    references = Path(args.reference).read_text(encoding="utf-8").splitlines()
    return {"seconds": seconds,
            "bleu": sacrebleu.corpus_bleu(output.read_text(encoding="utf-8").splitlines(), [references]).score}


def with_table(args, ckpt: str, folder: Path) -> Path:
    """A copy of `ckpt` in `folder` (made here) with its lexical table (task=shortlist: --candidates, --frequent)."""
    folder.mkdir()
    shutil.copy(ckpt, copied := folder / Path(ckpt).name)
    harness.in_process([sys.executable, str(args.run_py), "task=shortlist", f"ckpt_path={copied}",
                        f"task.candidates={args.candidates}", f"task.frequent={args.frequent}",
                        f"task.scoring={args.scoring}", f"hydra.run.dir={folder / 'run_shortlist'}"])
    return copied


def shortlist(args) -> dict:
    """task=shortlist, then each variant a fresh task=translate process, in turns: medians of the ratios."""
    rounds = args.rounds or 3
    with tempfile.TemporaryDirectory() as tmp:
        ckpt = with_table(args, args.ckpt, Path(tmp) / "table")
        measured = harness.rounds({v: partial(
            translation_run, args, ckpt, Path(tmp), v, "decoding=beam", "decoding.beam_size=4",
            f"quantize={'int8' if v.startswith('int8') else 'none'}",
            f"decoding.shortlist={'true' if v.endswith('shortlist') else 'false'}") for v in SHORTLIST}, rounds,
            "shortlist")
    table = harness.ratios(measured, SHORTLIST_PAIRS, lambda m: m["seconds"])
    bleu = {variant: measured[-1][variant]["bleu"] for variant in SHORTLIST}
    print(f"{harness.described(harness.machine())}; beam 4; table: {args.scoring}, K={args.candidates}, "
          f"F={args.frequent}; {rounds} rounds, a process per run\n")
    print(markdown_table(["without", "with", "speed-up (median)", "rounds", "BLEU without / with"],
                         [[r["b"], r["a"], f"{r['median']:.2f}x", " / ".join(f"{x:.2f}" for x in r["rounds"]),
                           f"{bleu[r['b']]:.2f} / {bleu[r['a']]:.2f}"] for r in table], right=(2,)))
    return {"rounds": measured, "bleu": bleu, "ratios": table}


ENGINES = {"ours": [], "CTranslate2": ["task.engine=ctranslate2"]}  # --what models: int8, a process a run
SEARCH_OVERRIDES = {"greedy": ["decoding=greedy"], "beam 4": ["decoding=beam", "decoding.beam_size=4"]}


def models(args) -> dict:
    """--ckpt against --versus: each engine and search a fresh task=translate process (int8; --shortlist: with
    the lexical table of these), in turns; medians of the per-round speed-ups (x > 1: --versus is the faster)."""
    rounds, ckpts = args.rounds or 3, {"ckpt": args.ckpt, "versus": args.versus}
    keys = [(engine, search, which) for engine in ENGINES for search in SEARCH_OVERRIDES for which in ckpts]
    tables = {"none": (), "versus": ("versus",), "both": ("ckpt", "versus")}[args.shortlist]
    with tempfile.TemporaryDirectory() as tmp:
        ckpts |= {which: with_table(args, ckpts[which], Path(tmp) / which) for which in tables}
        measured = harness.rounds({key: partial(
            translation_run, args, ckpts[key[2]], Path(tmp), "_".join(key), "quantize=int8", *ENGINES[key[0]],
            *SEARCH_OVERRIDES[key[1]], f"decoding.shortlist={str(key[2] in tables).lower()}") for key in keys},
            rounds, "models")
    table = harness.ratios(measured, [((e, s, "versus"), (e, s, "ckpt")) for e in ENGINES for s in SEARCH_OVERRIDES],
                           lambda m: m["seconds"])
    print(f"{harness.described(harness.machine())}; --ckpt {args.ckpt}, --versus {args.versus}; int8; shortlist: "
          f"{args.shortlist}; {rounds} rounds, a process per run\n")
    print(markdown_table(["engine", "search", "speed-up of --versus (median)", "rounds", "BLEU --ckpt / --versus"],
                         [[r["a"][0], r["a"][1], f"{r['median']:.2f}x", " / ".join(f"{x:.2f}" for x in r["rounds"]),
                           f"{measured[-1][r['b']]['bleu']:.2f} / {measured[-1][r['a']]['bleu']:.2f}"]
                          for r in table], right=(2,)))
    return {"rounds": [{" ".join(k): v for k, v in m.items()} for m in measured],
            "ratios": [{**r, "a": " ".join(r["a"]), "b": " ".join(r["b"])} for r in table]}
