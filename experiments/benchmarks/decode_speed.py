"""Decoding speed of one checkpoint: greedy and beam 4, with and without the KV cache.

    python experiments/benchmarks/decode_speed.py --ckpt outputs/train/<run>/checkpoints/best.ckpt \
        [--source $DATA_DIR/multi30k/test2016.en] [--limit N] [--device cpu]

Without --source it decodes a generated set with Multi30k's test2016 source lengths (random
tokens). Prints sentences/s and output tokens/s per setting, and the cache speed-up when every
output is forced to exactly 50 tokens (min_len = max_len = 50).
"""

import argparse
import random
import time
from pathlib import Path

import torch

from transformer_mt.data.batching import Collator, TokenBudgetBatchSampler
from transformer_mt.data.corpus import clean, read_lines
from transformer_mt.decoding import BeamSearch, GreedySearch
from transformer_mt.tasks.common import load_module


def sources(module, path: str | None, limit: int | None) -> list[list[int]]:
    eos = module.tokenizer.src.special_ids["eos_id"]
    if path:
        lines, _ = clean(read_lines(path))
        ids = module.tokenizer.encode_sources(lines)
    else:  # Multi30k-like lengths: 4 to 40 tokens, mean about 15
        rng = random.Random(0)
        vocab = module.model.config.src_vocab_size
        ids = [[rng.randrange(4, vocab) for _ in range(max(4, min(40, int(rng.gauss(15, 5)))))] + [eos]
               for _ in range(1000)]
    return ids[:limit] if limit else ids


def decode_all(module, search, src: list[list[int]], max_tokens: int, device) -> tuple[float, int, list]:
    """Seconds and output tokens (EOS included) to decode every sentence, and the outputs."""
    collate = Collator(module.hparams.pad_id, module.hparams.bos_id, module.hparams.eos_id)
    sampler = TokenBudgetBatchSampler([len(s) for s in src], max_tokens, shuffle=False)
    outputs, tokens = [], 0
    start = time.perf_counter()
    for batch in sampler:
        hyps = search(module.model, collate.pad([src[i] for i in batch]).to(device), module.hparams.bos_id,
                      module.hparams.eos_id)
        tokens += sum(len(h[0].tokens) + 1 for h in hyps)
        outputs += [h[0].tokens for h in hyps]
    return time.perf_counter() - start, tokens, outputs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ckpt", required=True)
    parser.add_argument("--source", default=None, help="source sentences, one per line")
    parser.add_argument("--limit", type=int, default=None, help="decode only the first N sentences")
    parser.add_argument("--forced-limit", type=int, default=200, help="sentences for the 50-token comparison")
    parser.add_argument("--max-tokens", type=int, default=4096)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()

    device = torch.device(args.device)
    module = load_module(Path(args.ckpt)).to(device)
    src = sources(module, args.source, args.limit)
    print(f"checkpoint: {args.ckpt}\nsentences: {len(src)} ({'file ' + args.source if args.source else 'generated'})"
          f"\ndevice: {device}, torch threads: {torch.get_num_threads()}\n")
    print("| search | cache | sentences/s | tokens/s | seconds | same output as cached |")
    print("| --- | --- | ---: | ---: | ---: | --- |")
    for name, make in (("greedy", lambda c: GreedySearch(use_cache=c)),
                       ("beam 4", lambda c: BeamSearch(beam_size=4, length_penalty=0.6, use_cache=c))):
        cached_out = None
        for use_cache in (True, False):
            seconds, tokens, out = decode_all(module, make(use_cache), src, args.max_tokens, device)
            cached_out = out if use_cache else cached_out
            same = "-" if use_cache else str(out == cached_out)
            print(f"| {name} | {'yes' if use_cache else 'no'} | {len(src) / seconds:.1f} | {tokens / seconds:.0f} "
                  f"| {seconds:.1f} | {same} |")

    forced = src[: args.forced_limit]
    print(f"\nEvery output forced to 50 tokens ({len(forced)} sentences):\n")
    print("| search | tokens/s with cache | tokens/s without | cache speed-up |")
    print("| --- | ---: | ---: | ---: |")
    options = dict(max_len_a=0, max_len_b=50, min_len=50)
    for name, make in (("greedy", lambda c: GreedySearch(use_cache=c, **options)),
                       ("beam 4", lambda c: BeamSearch(beam_size=4, use_cache=c, **options))):
        with_cache, tokens, _ = decode_all(module, make(True), forced, args.max_tokens, device)
        without, _, _ = decode_all(module, make(False), forced, args.max_tokens, device)
        print(f"| {name} | {tokens / with_cache:.0f} | {tokens / without:.0f} | {without / with_cache:.2f}x |")


if __name__ == "__main__":
    main()
