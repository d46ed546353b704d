"""The same checkpoint translated by us, by its Hugging Face export (`generate`) and by its
CTranslate2 exports (float32, int8): BLEU of each, and how many outputs equal ours. All stop at
our length limit (1.2 x source tokens + 10).

    DATA_DIR=/path/to/data python experiments/interop/score_exports.py \\
        --ckpt outputs/train/<run>/checkpoints/best.ckpt \\
        --source $DATA_DIR/multi30k/test2016.en --reference $DATA_DIR/multi30k/test2016.de
"""

import argparse
import tempfile
import time
from pathlib import Path

import ctranslate2
import torch
import transformers

from transformer_mt.decoding import BeamSearch, GreedySearch
from transformer_mt.decoding.search import max_lengths
from transformer_mt.evaluation.metrics import corpus_scores
from transformer_mt.interop.ctranslate2 import export_ct2
from transformer_mt.interop.marian import export_hf
from transformer_mt.tasks.common import load_module

BATCH = 64


def pad(seqs: list[list[int]], pad_id: int) -> torch.Tensor:
    return torch.nn.utils.rnn.pad_sequence([torch.tensor(s) for s in seqs], batch_first=True, padding_value=pad_id)


def ours(module, sources, search) -> list[list[int]]:
    out = []
    for i in range(0, len(sources), BATCH):
        src = pad(module.tokenizer.encode_sources(sources[i:i + BATCH]), module.hparams.pad_id)
        out += [n[0].tokens for n in search(module.model, src, module.hparams.bos_id, module.hparams.eos_id)]
    return out


def hf(folder: Path, module, sources, beams: int) -> list[list[int]]:
    model = transformers.MarianMTModel.from_pretrained(folder).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    eos, pad_id = model.config.eos_token_id, model.config.pad_token_id
    out = []
    for i in range(0, len(sources), BATCH):
        chunk = sources[i:i + BATCH]
        enc = tokenizer(chunk, return_tensors="pt", padding=True)
        limit = int(max_lengths(enc["input_ids"], pad_id, 1.2, 10, module.model.config.max_positions).max())
        with torch.no_grad():
            rows = model.generate(**enc, num_beams=beams, length_penalty=0.6, early_stopping=True, do_sample=False,
                                  max_new_tokens=limit + 1).tolist()
        for row in rows:
            row = row[1:]
            out.append(row[: row.index(eos)] if eos in row else [t for t in row if t != pad_id])
    return out


def ct2(folder: Path, module, sources, beams: int) -> list[list[int]]:
    translator = ctranslate2.Translator(str(folder), device="cpu", inter_threads=1, intra_threads=2)
    vocab = module.tokenizer
    tokens = [vocab.src.tokens(ids) for ids in vocab.src.encode(sources)]
    results = translator.translate_batch(tokens, beam_size=beams, length_penalty=0.6, max_batch_size=BATCH,
                                         max_decoding_length=256)
    return [[vocab.tgt.token_id(t) for t in r.hypotheses[0]] for r in results]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ckpt", required=True)
    parser.add_argument("--source", required=True)
    parser.add_argument("--reference", required=True)
    args = parser.parse_args()
    torch.set_num_threads(2)
    module = load_module(Path(args.ckpt))
    sources = Path(args.source).read_text(encoding="utf-8").splitlines()
    refs = Path(args.reference).read_text(encoding="utf-8").splitlines()
    rows = []
    src_ids = module.tokenizer.encode_sources(sources)
    limits = [min(int(1.2 * len(ids) + 10), module.model.config.max_positions - 2) for ids in src_ids]
    with tempfile.TemporaryDirectory() as tmp:
        export_hf(module, Path(tmp) / "hf")
        export_ct2(module, Path(tmp) / "ct2", "none")
        export_ct2(module, Path(tmp) / "ct2_int8", "int8")
        for beams, search in ((1, GreedySearch(1.2, 10)), (4, BeamSearch(4, 0.6, 1.2, 10))):
            started = time.perf_counter()
            mine = ours(module, sources, search)
            systems = [("ours", mine, time.perf_counter() - started)]
            for name, translate, folder in (("HF generate", hf, "hf"), ("CTranslate2 float32", ct2, "ct2"),
                                            ("CTranslate2 int8", ct2, "ct2_int8")):
                started = time.perf_counter()
                ids = translate(Path(tmp) / folder, module, sources, beams)
                seconds = time.perf_counter() - started
                # our searches end a sentence at max_len_a * src_len + max_len_b tokens; the peers
                # have one limit per batch: cut their outputs where ours would have stopped
                systems.append((name, [hyp[:limit] for hyp, limit in zip(ids, limits)], seconds))
            for name, ids, seconds in systems:
                bleu = corpus_scores(module.tokenizer.tgt.decode(ids), refs)["bleu"]
                same = sum(a == b for a, b in zip(ids, mine))
                rows.append((f"beam {beams}" if beams > 1 else "greedy", name, bleu, same, seconds))
    print(f"{len(sources)} sentences; BLEU: sacreBLEU 13a, cased, detokenized\n")
    print("| search | system | BLEU | outputs equal to ours | seconds |\n| --- | --- | ---: | ---: | ---: |")
    for search, name, bleu, same, seconds in rows:
        print(f"| {search} | {name} | {bleu:.2f} | {same} / {len(sources)} | {seconds:.1f} |")


if __name__ == "__main__":
    main()
