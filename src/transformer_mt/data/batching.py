"""Token-budget batching: length buckets, a padded-token budget, per-epoch shuffling, DDP shards,
and a resumable position inside an epoch."""

import itertools
from collections.abc import Callable, Iterator, Sequence

import numpy as np
import pyarrow as pa
import torch
from torch.utils.data import Dataset, Sampler

from transformer_mt.data.shape_grid import ShapeGrid
from transformer_mt.errors import DataError
from transformer_mt.packing import Packed, Packing


class EpochBatch(list):
    """A batch's row indices, and the epoch they are drawn for (BPE-dropout segments by epoch)."""

    def __init__(self, rows: list[int], epoch: int) -> None:
        super().__init__(rows)
        self.epoch = epoch


class TranslationDataset(Dataset):
    """Encoded pairs read from an Arrow dataset (`datasets.Dataset`) with columns src_ids (ending
    in EOS), tgt_ids (no specials), src_len, tgt_len and, for evaluation, src_text / tgt_text.
    `dropout` (training with data.tokenizer.dropout; data/dropout.py's EpochDropout): the ids of an
    EpochBatch's rows come in its epoch's segmentation."""

    def __init__(self, table, dropout=None) -> None:
        self.table, self.dropout = table, dropout
        self.rows = table.with_format("arrow")  # indexing gives pyarrow tables, never Python lists

    def __len__(self) -> int:
        return len(self.table)

    def __getitem__(self, i: int) -> pa.Table:
        return self.__getitems__([i])

    def __getitems__(self, indices: list[int]) -> pa.Table:
        """The batch's rows as one Arrow table, with their indices as an `id` column (the DataLoader
        calls this once per batch)."""
        rows = self.rows[list(indices)]
        if self.dropout is not None and isinstance(indices, EpochBatch):
            rows = self.dropout.rows(rows, np.asarray(indices, dtype=np.int64), indices.epoch)
        return rows.append_column("id", pa.array(indices, type=pa.int64()))

    def sizes(self) -> np.ndarray:
        """Padded cost of each example: the longer of the source and the target + 1 (BOS / EOS)."""
        lengths = self.table.with_format("numpy", columns=["src_len", "tgt_len"])[:]  # one columnar read
        src, tgt = lengths["src_len"].astype(np.int64), lengths["tgt_len"].astype(np.int64)
        return np.maximum(src, tgt + 1)


def pin_memory(trainer) -> bool:
    """Whether batches go to page-locked memory: when the trainer's root device is a GPU (a faster,
    asynchronous copy to it)."""
    return trainer is not None and trainer.strategy.root_device.type == "cuda"


def round_up(sizes: np.ndarray | int, multiple: int) -> np.ndarray | int:
    """`sizes` rounded up to a multiple of `multiple`."""
    return -(-sizes // multiple) * multiple


def first_above(sizes: np.ndarray, limit: int | None) -> int | None:
    """The index of the first size above `limit` (None: none is, or there is no limit)."""
    above = np.flatnonzero(sizes > limit) if limit is not None else ()
    return int(above[0]) if len(above) else None


def flat_lists(column: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """The values of an Arrow list column end to end, and the length of each list."""
    lists = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column  # a chunk per gathered row
    return lists.flatten().to_numpy(), np.diff(lists.offsets.to_numpy()).astype(np.int64)


class Collator:
    """Pads a batch into src (B, S), tgt_in = BOS + y (B, T), tgt_out = y + EOS (B, T), with S and T
    rounded up to a multiple of `pad_to_multiple`; num_tokens counts the real (unpadded) source and
    target tokens, num_src_tokens the source ones, both known without a device sync. Each tensor is
    written once, with numpy, from the Arrow columns.

    packed=True: no padding at all: src (Ns,), tgt_in and tgt_out (Nt,) hold the sentences end to
    end, and `packing` (transformer_mt/packing.py) says where each lies (cumulative lengths, the longest,
    positions), all built here on the host. grid (data.shape_grid's ShapeGrid): each batch padded
    to its shape, rows and lengths."""

    def __init__(self, pad_id: int, bos_id: int, eos_id: int, pad_to_multiple: int = 1, packed: bool = False,
                 grid: ShapeGrid | None = None) -> None:
        self.pad_id, self.bos_id, self.eos_id = pad_id, bos_id, eos_id
        self.pad_to_multiple, self.packed, self.grid = pad_to_multiple, packed, grid

    def padded(self, values: np.ndarray, lengths: np.ndarray, width: int, start: int = 0) -> np.ndarray:
        """A (B, width) array of pad_id whose row i holds the next lengths[i] of `values` from column `start`."""
        out = np.full((len(lengths), width), self.pad_id, dtype=np.int64)
        out[:, start:][np.arange(width - start) < lengths[:, None]] = values
        return out

    def pad(self, seqs: list[list[int]]) -> torch.Tensor:
        """Token id lists padded into one (B, longest) tensor."""
        lengths = np.array([len(s) for s in seqs], dtype=np.int64)
        values = np.fromiter(itertools.chain.from_iterable(seqs), dtype=np.int64, count=int(lengths.sum()))
        return torch.from_numpy(self.padded(values, lengths, int(lengths.max())))

    def widths(self, src_len: np.ndarray, tgt_len: np.ndarray) -> tuple[int, int, int]:
        """(rows, source width, target width) of the padded batch: its own rows and lengths rounded
        up to pad_to_multiple, or on the grid its shape (both sides as long as the shape)."""
        width = round_up(int(src_len.max()), self.pad_to_multiple)
        length = round_up(int(tgt_len.max()) + 1, self.pad_to_multiple)
        if self.grid is None:
            return len(src_len), width, length
        rows, length = self.grid.shape(max(width, length))
        if rows < len(src_len):
            raise DataError(f"a batch of {len(src_len)} rows is larger than its data.shape_grid shape ({rows} rows)")
        return rows, length, length

    def __call__(self, rows: pa.Table) -> dict:
        """The batch of the rows that `TranslationDataset.__getitems__` read. On the grid, the rows
        that fill it up have the source EOS and the target BOS alone (no row of attention is
        empty) and no target to predict: they add nothing to the loss or the gradients."""
        src, src_len = flat_lists(rows.column("src_ids"))
        tgt, tgt_len = flat_lists(rows.column("tgt_ids"))
        if self.packed:
            return {**self.packed_batch(src, src_len, tgt, tgt_len), **self.extras(rows, src_len, tgt_len)}
        count, width, length = self.widths(src_len, tgt_len)
        tgt_in = self.padded(tgt, tgt_len, length, start=1)
        tgt_in[:, 0] = self.bos_id
        tgt_out = self.padded(tgt, tgt_len, length)
        tgt_out[np.arange(len(tgt_len)), tgt_len] = self.eos_id
        src_ids = self.padded(src, src_len, width)
        if count > len(src_len):  # the rows that fill the grid's shape
            fill = np.full((count - len(src_len), max(width, length)), self.pad_id, dtype=np.int64)
            src_ids, tgt_out = np.concatenate([src_ids, fill[:, :width]]), np.concatenate([tgt_out, fill[:, :length]])
            tgt_in = np.concatenate([tgt_in, fill[:, :length]])
            src_ids[len(src_len):, 0], tgt_in[len(src_len):, 0] = self.eos_id, self.bos_id
        batch = {"src": torch.from_numpy(src_ids), "tgt_in": torch.from_numpy(tgt_in),
                 "tgt_out": torch.from_numpy(tgt_out)}
        return {**batch, **self.extras(rows, src_len, tgt_len)}

    def packed_batch(self, src: np.ndarray, src_len: np.ndarray, tgt: np.ndarray, tgt_len: np.ndarray) -> dict:
        """The sentences end to end: src as stored, tgt_in = BOS + y and tgt_out = y + EOS each."""
        packing = Packing(Packed.from_lengths(src_len), Packed.from_lengths(tgt_len + 1))
        first = packing.tgt.positions.numpy() == 0
        last = np.zeros_like(first)
        last[packing.tgt.cu_seqlens.numpy()[1:] - 1] = True
        tgt_in, tgt_out = np.full(len(first), self.bos_id, np.int64), np.full(len(first), self.eos_id, np.int64)
        tgt_in[~first], tgt_out[~last] = tgt, tgt
        return {"src": torch.from_numpy(src.astype(np.int64)), "tgt_in": torch.from_numpy(tgt_in),
                "tgt_out": torch.from_numpy(tgt_out), "packing": packing}

    @staticmethod
    def extras(rows: pa.Table, src_len: np.ndarray, tgt_len: np.ndarray) -> dict:
        """Row ids, token counts (no device sync to read them) and, for evaluation, the texts."""
        extras = {"id": torch.from_numpy(rows.column("id").to_numpy().astype(np.int64)),
                  "num_tokens": int(src_len.sum() + tgt_len.sum()) + len(tgt_len),
                  "num_src_tokens": int(src_len.sum())}
        if "tgt_text" in rows.column_names:
            extras["src_text"] = rows.column("src_text").to_pylist()
            extras["tgt_text"] = rows.column("tgt_text").to_pylist()
        return extras


class EpochHook:
    """The object Lightning finds at `batch_sampler.sampler`: its `set_epoch` reaches the batch
    sampler, so every epoch gets its own batch order."""

    def __init__(self, batch_sampler: "TokenBudgetBatchSampler") -> None:
        self.batch_sampler = batch_sampler

    def set_epoch(self, epoch: int) -> None:
        self.batch_sampler.set_epoch(epoch)


class TokenBudgetBatchSampler(Sampler[list[int]]):
    """Batches of similar-length examples whose padded size (count x longest, the longest rounded up
    to a multiple of `pad_to_multiple` as the Collator pads it) fits `max_tokens`.

    Examples are sorted by that padded length (ties broken at random per epoch when shuffling), cut into
    batches greedily, and the batch order is shuffled from (seed, epoch). Batches, not examples,
    are dealt out to the `num_replicas` ranks; with `even=True` (training) the list is padded by
    repeating batches so every rank runs the same number of steps, with `even=False` (evaluation)
    every example is seen exactly once. `state_dict()` records how far into which epoch the
    consumer got; after `load_state_dict()`, iterating that epoch yields only the rest.

    Lightning calls `set_epoch` on `dataloader.sampler` and `dataloader.batch_sampler.sampler`,
    never on the batch sampler itself, so `self.sampler` is an `EpochHook` that forwards it.
    `epoch_sizes(epoch)`: with BPE-dropout, each epoch's sizes (its segmentation's); batches are
    EpochBatch lists that tell the dataset their epoch. `epoch_rows(epoch)`: with several corpora
    (data/mixture.py), the rows that epoch shows, a row possibly more than once (None: every row once).
    `shape_grid` K (data.shape_grid): the batches take at most K shapes (data/shape_grid.py's
    ShapeGrid, fitted to these sizes): the examples of each shape in random order, cut into batches
    of its rows; the batch order shuffled as without it.
    """

    def __init__(self, sizes: Sequence[int], max_tokens: int, shuffle: bool, seed: int = 0,
                 num_replicas: int = 1, rank: int = 0, even: bool = True, pad_to_multiple: int = 1,
                 epoch_sizes: Callable[[int], np.ndarray] | None = None,
                 epoch_rows: Callable[[int], np.ndarray] | None = None, shape_grid: int | None = None) -> None:
        self.lengths = np.asarray(sizes, dtype=np.int64)
        sizes = round_up(self.lengths, pad_to_multiple)  # what a batch costs once padded
        too_long = np.flatnonzero(sizes > max_tokens)
        if too_long.size:
            padded = f" padded to a multiple of {pad_to_multiple}" if pad_to_multiple > 1 else ""
            raise DataError(
                f"example {too_long[0]} has {sizes[too_long[0]]} tokens{padded}, more than the batch budget "
                f"{max_tokens} (data.max_tokens / data.eval_max_tokens)"
            )
        self.sizes, self.max_tokens, self.shuffle, self.seed = sizes, max_tokens, shuffle, seed
        self.num_replicas, self.rank, self.even = num_replicas, rank, even
        self.pad_to_multiple, self.epoch_sizes = pad_to_multiple, epoch_sizes  # epoch_sizes: BPE-dropout's
        self.epoch_rows = epoch_rows
        self.grid = ShapeGrid.fitted(sizes, shape_grid, max_tokens) if shape_grid else None
        self.rows: np.ndarray | None = None  # this epoch's rows (epoch_rows); None: every row once
        self.epoch = 0
        self.position = 0  # batches of this rank already yielded in this epoch
        self._resume: tuple[int, int] | None = None  # (epoch, batches to skip)
        self._cache: tuple[int, list[list[int]]] | None = None
        self.sampler = EpochHook(self)

    def set_epoch(self, epoch: int) -> None:
        self.epoch, self.position = epoch, 0

    def all_batches(self) -> list[list[int]]:
        """The batches of this epoch across all ranks, in the order they are dealt out."""
        if self._cache is not None and self._cache[0] == self.epoch:
            return self._cache[1]
        if self.epoch_sizes is not None:  # this epoch's segmentation: its own sizes
            self.lengths = np.asarray(self.epoch_sizes(self.epoch), dtype=np.int64)
            self.sizes = round_up(self.lengths, self.pad_to_multiple)
        if self.epoch_rows is not None:
            self.rows = np.asarray(self.epoch_rows(self.epoch), dtype=np.int64)
        sizes = self.sizes if self.rows is None else self.sizes[self.rows]
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + self.epoch)
        n = len(sizes)
        keys = sizes if self.grid is None else self.grid.buckets(sizes)  # on a grid: its shapes, in any order
        if self.shuffle:  # random order, then a stable sort: equal keys in random order
            order = torch.randperm(n, generator=g).numpy()
            order = order[np.argsort(keys[order], kind="stable")]
        else:
            order = np.argsort(keys, kind="stable")
        cuts = self.cuts(sizes[order]) if self.grid is None else self.grid_cuts(keys[order])
        if self.rows is not None:  # positions in this epoch's rows -> rows of the table
            order = self.rows[order]
        batches = [order[start:end].tolist() for start, end in cuts]
        if self.shuffle:
            batches = [batches[i] for i in torch.randperm(len(batches), generator=g).tolist()]
        if not self.even:  # every rank needs a batch: DDP ranks meet at the end of evaluation
            while len(batches) < self.num_replicas and max(map(len, batches), default=0) > 1:
                largest = max(range(len(batches)), key=lambda i: len(batches[i]))
                big = batches.pop(largest)
                batches[largest:largest] = [big[: len(big) // 2], big[len(big) // 2 :]]
            if len(batches) < self.num_replicas:
                raise DataError(f"{n} sentences cannot be shared by {self.num_replicas} processes")
        if self.even and batches:
            for k in range(-len(batches) % self.num_replicas):
                batches.append(batches[k % len(batches)])
        self._cache = (self.epoch, batches)
        return batches

    def cuts(self, order_sizes: np.ndarray) -> list[tuple[int, int]]:
        """(start, end) of each batch of the examples of these sizes, in order: greedily, as many
        as fit the budget once padded to the longest."""
        cuts, start, longest = [], 0, 0
        for end, size in enumerate(order_sizes.tolist()):
            longest_with = max(longest, size)
            if end > start and longest_with * (end - start + 1) > self.max_tokens:
                cuts.append((start, end))
                start, longest_with = end, size
            longest = longest_with
        return cuts + [(start, len(order_sizes))] if len(order_sizes) else cuts

    def grid_cuts(self, order_buckets: np.ndarray) -> list[tuple[int, int]]:
        """(start, end) of each batch on the grid: the examples of each shape (sorted by it) in
        batches of its rows, the last of a shape possibly short (the Collator fills it up)."""
        cuts = []
        edges = np.flatnonzero(np.diff(order_buckets)) + 1
        for first, last in zip([0, *edges.tolist()], [*edges.tolist(), len(order_buckets)]):
            rows = self.grid.rows[int(order_buckets[first])]
            cuts += [(start, min(start + rows, last)) for start in range(first, last, rows)]
        return cuts

    def __iter__(self) -> Iterator[list[int]]:
        mine = self.all_batches()[self.rank :: self.num_replicas]
        skip = 0
        if self._resume is not None and self._resume[0] == self.epoch:
            skip = self._resume[1]
        self._resume = None
        self.position = skip
        for i in range(skip, len(mine)):
            self.position = i + 1
            yield EpochBatch(mine[i], self.epoch)

    def __len__(self) -> int:
        return len(self.all_batches()[self.rank :: self.num_replicas])

    def state_dict(self, consumed: int | None = None) -> dict[str, int]:
        """Where this rank is: `consumed` batches of `epoch` (default: those yielded so far)."""
        return {"epoch": self.epoch, "consumed": self.position if consumed is None else consumed,
                "seed": self.seed, "num_replicas": self.num_replicas}

    def load_state_dict(self, state: dict[str, int]) -> None:
        if state["seed"] != self.seed or state["num_replicas"] != self.num_replicas:
            raise DataError(f"cannot resume mid-epoch with another seed or number of processes "
                            f"(was seed={state['seed']}, {state['num_replicas']} processes)")
        self.epoch = state["epoch"]
        self._resume = (state["epoch"], state["consumed"])

    def padding_fraction(self) -> float:
        """Share of padded positions in this epoch's batches (of count x padded longest)."""
        batches = self.all_batches()
        total = sum(self.padded_positions(b) for b in batches)
        used = sum(int(self.lengths[b].sum()) for b in batches)
        return 1 - used / total if total else 0.0

    def padded_positions(self, batch: list[int]) -> int:
        """Rows x length of a batch once padded (on the grid: its shape's, the filling rows included)."""
        longest = int(self.sizes[batch].max())
        if self.grid is None:
            return len(batch) * longest
        rows, length = self.grid.shape(longest)
        return rows * length
