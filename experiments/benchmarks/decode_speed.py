"""Decoding speed and BLEU of one checkpoint, ours against Hugging Face `generate` and CTranslate2.

    python experiments/benchmarks/decode_speed.py --ckpt CKPT --source SRC --reference REF [--repeat 3]
        [--rounds 5 [--load N]] [--limit N] [--batch 64] [--length-penalty 0.6] [--inter N] [--intra N]
        [--kernels auto] [--ct2-inter 1] [--ct2-intra 2] [--only SYSTEM ...] [--json PATH]
    python experiments/benchmarks/decode_speed.py --ckpt ... --source SRC --cache   # the KV cache against none
    python experiments/benchmarks/decode_speed.py --ckpt ... --device cuda --dtype bf16 [--static]

Ours (fp32, int8), the checkpoint's HF export (`MarianMTModel.generate`) and its CTranslate2 exports
(float32, int8), greedy and beam 4, on the same length-sorted batches and 2 cores (ours: --inter x
--intra decoders on --kernels; CTranslate2: --ct2-inter x --ct2-intra); each system's best of
--repeat rounds in one process (the systems take turns), its BLEU, target tokens/s, outputs equal to
ours in fp32. Our searches end a sentence at 1.2 x source tokens + 10; the peers' outputs are cut
there. --rounds N: each system alone in a fresh process (this script with --only) instead, the order
rotated every round; per pair the median of the per-round ratios; --load N: each again beside N busy
processes. --cache: with and without the KV cache. --device cuda: ours cast to --dtype (and on the
compiled static step with CUDA graphs), HF and CTranslate2 on the GPU. README.md says more.
"""

import copy
import importlib.util
import json
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import harness
import torch
from decode_rounds import in_rounds

from transformer_mt.choices import KERNELS
from transformer_mt.data.batching import Collator
from transformer_mt.decoding import BeamSearch, GreedySearch, PowerLength, SearchOptions
from transformer_mt.decoding.search import max_lengths
from transformer_mt.evaluation.metrics import corpus_scores
from transformer_mt.inference.members import load_translator
from transformer_mt.inference.workers import SERIAL, Workers
from transformer_mt.markdown import markdown_table
from transformer_mt.model.attention import kernels
from transformer_mt.model.kernels import Kernels, default_cache
from transformer_mt.model.quantize import on_kernels, quantize_int8
from transformer_mt.model.static_step import StaticDecoder

BATCH = 64
THREADS = 2  # on the CPU


@dataclass(frozen=True)
class Setup:
    """How every system decodes: sentences a batch, beam search's length penalty, and on the CPU
    ours' decoders (inter_threads, intra_threads: inference/workers.py; None: the defaults) and
    kernels (model/kernels.py), CTranslate2's inter_threads and intra_threads."""

    batch: int = BATCH
    length_penalty: float = 0.6
    inter: int | None = None
    intra: int | None = None
    kernels: str = "auto"
    ct2_inter: int = 1
    ct2_intra: int = THREADS

    def workers(self, device: str) -> Workers:
        return Workers.for_device(self.inter, self.intra, torch.device(device), THREADS)

    def describe(self, device: str) -> str:
        if device != "cpu":
            return "CUDA"
        return (f"ours {self.workers(device).describe()}, kernels={self.kernels}; CTranslate2 inter_threads="
                f"{self.ct2_inter}, intra_threads={self.ct2_intra}")


SETUP = ("batch", "length_penalty", "inter", "intra", "kernels", "ct2_inter", "ct2_intra")  # Setup's fields
SYSTEMS = ("ours float32", "ours int8", "CTranslate2 float32", "CTranslate2 int8")  # of --rounds, and their pairs
PAIRS = (("ours float32", "CTranslate2 float32"), ("ours int8", "CTranslate2 int8"), ("ours int8", "ours float32"))
SEARCHES = ("greedy", "beam 4")
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
NAMES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}  # also CTranslate2's compute_type


def installed(package: str) -> bool:
    return importlib.util.find_spec(package) is not None


def batches(items: list, size: int = BATCH) -> list[list]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def ours(module, model, src: list[list[int]], search, device: str, setup: Setup = Setup(),
         workers: Workers = SERIAL) -> list[list[int]]:
    """Our search's best output of each sentence, the batches shared among `workers`' decoders."""
    collate = Collator(module.pad_id, module.bos_id, module.eos_id)

    def one(chunk: list[list[int]]) -> list[list[int]]:
        return [n[0].tokens for n in search(model, collate.pad(chunk).to(device), module.bos_id, module.eos_id)]

    return [tokens for out in workers.map(one, batches(src, setup.batch)) for tokens in out]


def cast(model, device: str, dtype: str):
    """A copy of the model on `device` in `dtype` (the checkpoint's stays fp32 on the CPU, for the exports)."""
    return copy.deepcopy(model).to(device=device, dtype=DTYPES[dtype])


def hf_translator(folder: Path, module, device: str = "cpu", dtype: str = "fp32", setup: Setup = Setup()):
    import transformers

    model = transformers.MarianMTModel.from_pretrained(folder).to(device=device, dtype=DTYPES[dtype]).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    eos, pad_id = model.config.eos_token_id, model.config.pad_token_id

    def translate(lines: list[str], beams: int) -> list[list[int]]:
        out = []
        for chunk in batches(lines, setup.batch):
            enc = tokenizer(chunk, return_tensors="pt", padding=True).to(device)
            limit = int(max_lengths(enc["input_ids"].cpu(), pad_id, 1.2, 10, module.max_positions).max())
            with torch.no_grad(), kernels(torch.device(device)):  # our SDPA kernels (no cuDNN on a GPU)
                rows = model.generate(**enc, num_beams=beams, length_penalty=setup.length_penalty, early_stopping=True,
                                      do_sample=False, max_new_tokens=limit + 1).tolist()
            for row in rows:
                row = row[1:]
                out.append(row[: row.index(eos)] if eos in row else [t for t in row if t != pad_id])
        return out

    return translate


def ct2_translator(folder: Path, module, device: str = "cpu", dtype: str = "fp32", setup: Setup = Setup()):
    """On the CPU the export's own type (float32 or int8); on CUDA compute_type = dtype. With
    inter_threads > 1 the batches are given from as many threads at once (as ours)."""
    import ctranslate2

    compute_type = NAMES[dtype] if device == "cuda" else "default"
    translator = ctranslate2.Translator(str(folder), device=device, compute_type=compute_type,
                                        inter_threads=setup.ct2_inter, intra_threads=setup.ct2_intra)
    vocab = module.tokenizer
    collate = Collator(module.pad_id, module.bos_id, module.eos_id)

    def translate(lines: list[str], beams: int) -> list[list[int]]:
        def one(chunk: list[str]) -> list[list[int]]:  # our batches, each with the limit of its longest source
            ids = vocab.encode_sources(chunk)
            limit = int(max_lengths(collate.pad(ids), module.pad_id, 1.2, 10, module.max_positions).max())
            results = translator.translate_batch([vocab.src.tokens(i[:-1]) for i in ids], beam_size=beams,
                                                 length_penalty=setup.length_penalty, max_batch_size=setup.batch,
                                                 max_decoding_length=limit + 1)
            return [[vocab.tgt.token_id(t) for t in r.hypotheses[0]] for r in results]

        with Workers(setup.ct2_inter) as threads:
            return [ids for out in threads.map(one, batches(lines, setup.batch)) for ids in out]

    return translate


def working(peers: list[tuple[str, object]], lines: list[str]) -> tuple[list, dict[str, str]]:
    """Each peer's translate function (from its factory) if it loads and translates two sentences
    without an error, else the first line of its error (a CTranslate2 wheel built for another
    CUDA, say): one peer that cannot run on this machine does not cost the figures of the others."""
    kept, skipped = [], {}
    for name, make in peers:
        try:
            translate = make()
            translate(lines, 1)
        except Exception as error:  # noqa: BLE001 - any failure of a peer's library is reported, not raised
            skipped[name] = (f"{type(error).__name__}: {error}".splitlines() or [""])[0]
            continue
        kept.append((name, translate))
    return kept, skipped


def race(runs: dict, repeat: int, device: str = "cpu") -> dict[str, tuple[float, list]]:
    """Each run's shortest time of `repeat` rounds and its output (the runs take turns: harness.py)."""
    measured = harness.rounds({name: partial(harness.timed, run, device) for name, run in runs.items()}, repeat)
    return {name: min((m[name] for m in measured), key=lambda timed: timed[0]) for name in runs}


def peer_translators(module, folder: Path, device: str, dtype: str, only: list | None = None, setup: Setup = Setup()
                     ) -> list[tuple[str, Callable]]:
    """(name, translate) of each installed peer (`only`: those of them), the module
    exported into `folder` for it: HF generate, CTranslate2, and on a CPU CTranslate2 int8."""
    ct2_name = f"CTranslate2 {NAMES[dtype] if device == 'cuda' else 'float32'}"

    def wanted(name: str) -> bool:
        return only is None or name in only

    peers = []
    if installed("transformers") and wanted("HF generate"):
        from transformer_mt.interop.marian import export_hf

        export_hf(module.models[0], module.tokenizer, folder / "hf")
        peers.append(("HF generate", partial(hf_translator, folder / "hf", module, device, dtype, setup)))
    if not installed("ctranslate2"):
        return peers
    from transformer_mt.interop.ctranslate2 import export_ct2

    if wanted(ct2_name):
        export_ct2(module.models[0], module.tokenizer, folder / "ct2", "none")
        peers.append((ct2_name, partial(ct2_translator, folder / "ct2", module, device, dtype, setup)))
    if device == "cpu" and wanted("CTranslate2 int8"):
        export_ct2(module.models[0], module.tokenizer, folder / "ct2_int8", "int8")
        peers.append(("CTranslate2 int8", partial(ct2_translator, folder / "ct2_int8", module, setup=setup)))
    return peers


def our_systems(model, mine: str, device: str, dtype: str, chosen: Kernels | None, static: bool) -> dict:
    """Our decoders by name: the model in `dtype` (on the chosen kernels in fp32 on the CPU), int8
    on the CPU, and on the compiled static step with --static or on a GPU (CUDA graphs)."""
    systems = {mine: cast(model, device, dtype)}
    if device == "cpu":
        systems[mine] = on_kernels(systems[mine], chosen) if dtype == "fp32" else systems[mine]
        systems["ours int8"] = quantize_int8(model, chosen)
    if static or device == "cuda":
        systems[f"{mine} static"] = StaticDecoder(systems[mine], mode="reduce-overhead" if device == "cuda" else None)
    return systems


def compare(module, lines: list[str], refs: list[str], repeat: int, device: str = "cpu",
            dtype: str = "fp32", only: list | None = None, static: bool = False, setup: Setup = Setup()) -> dict:
    """The systems table: seconds, sentences/s, BLEU and outputs equal to ours, per search; printed,
    and returned (rows and ratios) for --json. `only`: those systems (--rounds runs each in a
    process of its own; outputs equal: not counted). static (always on a GPU): ours on the
    compiled static step too (model/static_step.py; CUDA graphs on a GPU)."""
    src = module.tokenizer.encode_sources(lines)
    order = sorted(range(len(src)), key=lambda i: len(src[i]))  # the same length-sorted batches for all
    lines, refs, src = [lines[i] for i in order], [refs[i] for i in order], [src[i] for i in order]
    collate = Collator(module.pad_id, module.bos_id, module.eos_id)
    # our searches' limits
    limits = SearchOptions(max_len_a=1.2, max_len_b=10).limits(module.models[0], collate.pad(src)).tolist()
    mine = f"ours {NAMES[dtype]}"
    chosen = Kernels(setup.kernels, default_cache()) if device == "cpu" else None
    systems, rows = our_systems(module.models[0], mine, device, dtype, chosen, static), []
    with tempfile.TemporaryDirectory() as tmp:
        peers, skipped = working(peer_translators(module, Path(tmp), device, dtype, only, setup), lines[:2])
        if only is not None:
            systems = {name: model for name, model in systems.items() if name in only}
        limited = SearchOptions(max_len_a=1.2, max_len_b=10)
        beam4 = BeamSearch(4, PowerLength(setup.length_penalty), options=limited)
        workers = setup.workers(device)
        for beams, search in ((1, GreedySearch(limited)), (4, beam4)):
            runs = {system: partial(ours, module, model, src, search, device, setup, workers)
                    for system, model in systems.items()}
            runs.update({peer: partial(translate, lines, beams) for peer, translate in peers})
            results = race(runs, repeat, device)
            reference = results[mine][1] if mine in results else None
            for system, (seconds, ids) in results.items():
                if not system.startswith("ours"):
                    ids = [hyp[:limit] for hyp, limit in zip(ids, limits)]
                equal = None if reference is None else sum(a == b for a, b in zip(ids, reference))
                bleu = corpus_scores(module.tokenizer.tgt.decode(ids), refs)["bleu"]
                tokens = sum(len(i) + 1 for i in ids)  # target tokens, EOS included
                rows.append({"search": f"beam {beams}" if beams > 1 else "greedy", "system": system,
                             "seconds": seconds, "sentences_per_s": len(lines) / seconds, "bleu": bleu,
                             "tokens_per_s": tokens / seconds, "outputs_equal": equal, "sentences": len(lines)})
        workers.close()
    if chosen is not None:
        print(chosen.describe())
    print(f"{len(lines)} sentences, batches of {setup.batch}, {setup.describe(device)}, {dtype}, best of {repeat}; "
          "BLEU: sacreBLEU 13a, cased, detokenized\n")
    ratios = print_tables(rows, mine, [peer for peer, _ in peers], device)
    for peer, error in skipped.items():
        print(f"{peer}: not measured: {error}")
    return {"systems": rows, "ratios": ratios, "skipped": skipped}


def print_tables(rows: list[dict], mine: str, peers: list[str], device: str) -> list[dict]:
    """The systems table and, against each peer, the ratio of seconds (x > 1: ours is faster);
    returns the ratios."""
    print(markdown_table(["search", "system", "seconds", "sentences/s", "BLEU", f"outputs equal to {mine}"],
                         [[r["search"], r["system"], f"{r['seconds']:.2f}", f"{r['sentences_per_s']:.0f}",
                           f"{r['bleu']:.2f}", f"{r['outputs_equal']} / {r['sentences']}"] for r in rows],
                         right=(2, 3, 4, 5)))
    present = {r["system"] for r in rows}
    pairs = [(mine, peer) for peer in peers if peer != "CTranslate2 int8" and mine in present]
    if device == "cpu" and "CTranslate2 int8" in peers and "ours int8" in present:
        pairs.append(("ours int8", "CTranslate2 int8"))
    ratios = []
    for search in ("greedy", "beam 4"):
        t = {r["system"]: r["seconds"] for r in rows if r["search"] == search}
        ratios += [{"search": search, "ours": a, "peer": b, "ratio": t[b] / t[a]} for a, b in pairs]
    if pairs:
        print("\n" + markdown_table(["search", *(f"{a} vs {b}" for a, b in pairs)],
                                    [[search, *(f"{r['ratio']:.2f}x" for r in ratios if r["search"] == search)]
                                     for search in ("greedy", "beam 4")], right=range(1, 1 + len(pairs))))
        print("\n(x > 1: ours is faster)")
    return ratios


def cache_tables(module, src: list[list[int]], forced_limit: int, device: str = "cpu", dtype: str = "fp32") -> dict:
    """Greedy and beam 4 with and without the KV cache (same outputs), and at 50-token outputs;
    printed, and returned for --json."""
    model = cast(module.models[0], device, dtype)
    rows, forced_rows, cells = [], [], []
    for name, make in (("greedy", lambda c: GreedySearch(SearchOptions(use_cache=c))),
                       ("beam 4", lambda c: BeamSearch(beam_size=4, length_norm=PowerLength(0.6),
                                                       options=SearchOptions(use_cache=c)))):
        cached_out = None
        for use_cache in (True, False):
            seconds, out = harness.timed(partial(ours, module, model, src, make(use_cache), device), device)
            tokens = sum(len(o) + 1 for o in out)
            cached_out = out if use_cache else cached_out
            same = None if use_cache else out == cached_out
            rows.append({"search": name, "cache": use_cache, "sentences_per_s": len(src) / seconds,
                         "tokens_per_s": tokens / seconds, "seconds": seconds, "same_output_as_cached": same})
            cells.append([name, "yes" if use_cache else "no", f"{len(src) / seconds:.1f}", f"{tokens / seconds:.0f}",
                          f"{seconds:.1f}", "-" if same is None else same])
    print(markdown_table(["search", "cache", "sentences/s", "tokens/s", "seconds", "same output as cached"], cells,
                         right=(2, 3, 4)))
    forced, cells = src[:forced_limit], []
    print(f"\nEvery output forced to 50 tokens ({len(forced)} sentences):\n")
    limits = dict(max_len_a=0, max_len_b=50, min_len=50)
    for name, make in (("greedy", lambda c: GreedySearch(SearchOptions(use_cache=c, **limits))),
                       ("beam 4", lambda c: BeamSearch(beam_size=4, options=SearchOptions(use_cache=c, **limits)))):
        with_cache, out = harness.timed(partial(ours, module, model, forced, make(True), device), device)
        without, _ = harness.timed(partial(ours, module, model, forced, make(False), device), device)
        tokens = sum(len(o) + 1 for o in out)
        forced_rows.append({"search": name, "tokens_per_s_cache": tokens / with_cache,
                            "tokens_per_s_no_cache": tokens / without, "speed_up": without / with_cache})
        cells.append([name, f"{tokens / with_cache:.0f}", f"{tokens / without:.0f}", f"{without / with_cache:.2f}x"])
    print(markdown_table(["search", "tokens/s with cache", "tokens/s without", "cache speed-up"], cells,
                         right=(1, 2, 3)))
    return {"cache": rows, "forced_50_tokens": forced_rows}


def main() -> None:
    parser = harness.parser(__doc__, device="cpu")
    add = parser.add_argument
    add("--ckpt", required=True)
    add("--source", required=True, help="source sentences, one per line")
    add("--reference", help="references, one per line (for the systems table)")
    add("--repeat", type=int, default=3, help="runs per system; the best time counts")
    add("--rounds", type=int, help="each system alone in a fresh process, this many rounds")
    add("--load", type=int, default=0, help="--rounds: each system again beside N busy processes")
    add("--script", type=Path, default=Path(__file__), help="--rounds: the script each process runs (default: this)")
    add("--cache", action="store_true", help="the KV-cache tables instead of the systems table")
    add("--forced-limit", type=int, default=200, help="sentences for the 50-token comparison")
    add("--dtype", choices=tuple(DTYPES), default="fp32", help="ours (cast), HF and CTranslate2")
    add("--limit", type=int, help="only the first N sentences")
    add("--static", action="store_true", help="ours on the compiled static step too (always with --device cuda)")
    add("--only", nargs="+", help="measure these systems alone (e.g. 'ours int8', 'CTranslate2 int8')")
    add("--batch", type=int, help=f"sentences a batch (default {BATCH})")
    add("--length-penalty", type=float, help="beam search's (default 0.6; CTranslate2's setup: 0)")
    add("--inter", type=int, help="ours: decoders at once (inter_threads; default: one per core)")
    add("--intra", type=int, help="ours: threads a decoder (intra_threads; default: the rest)")
    add("--kernels", choices=KERNELS, help="ours: model/kernels.py (default auto)")
    add("--ct2-inter", type=int, help="CTranslate2's inter_threads (default 1)")
    add("--ct2-intra", type=int, help=f"CTranslate2's intra_threads (default {THREADS})")
    args = parser.parse_args()
    if args.rounds:
        in_rounds(args, SETUP, SYSTEMS, PAIRS, SEARCHES)
        return
    setup = Setup(**{name: getattr(args, name) for name in SETUP if getattr(args, name) is not None})
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no GPU")
    torch.set_num_threads(THREADS)
    module = load_translator([Path(args.ckpt)], None)  # a Translator: the model, its tokenizer and ids
    lines = Path(args.source).read_text(encoding="utf-8").splitlines()[: args.limit]
    print(f"checkpoint: {args.ckpt} ({module.models[0].num_parameters():,} parameters)\nsentences: {args.source}\n")
    if args.cache:
        tables = cache_tables(module, module.tokenizer.encode_sources(lines), args.forced_limit, args.device,
                              args.dtype)
    else:
        if not args.reference:
            parser.error("--reference is needed for the systems table (or give --cache)")
        refs = Path(args.reference).read_text(encoding="utf-8").splitlines()[: args.limit]
        tables = compare(module, lines, refs, args.repeat, args.device, args.dtype, args.only, args.static, setup)
    if args.json:
        args.json.write_text(json.dumps({
            **harness.machine(args.device), "checkpoint": args.ckpt, "source": args.source, "sentences": len(lines),
            "device": args.device, "dtype": args.dtype, "threads": THREADS if args.device == "cpu" else None,
            "repeat": args.repeat, "setup": setup.describe(args.device), "batch": setup.batch,
            "length_penalty": setup.length_penalty, **tables}, indent=1))


if __name__ == "__main__":
    main()
