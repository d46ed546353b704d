"""Work shared by several devices, one process each (torch.multiprocessing): the synthetic stage's
chunks on trainer.devices > 1. A process on the CPU is forked and gets its share of the threads; one
on a GPU is spawned (CUDA does not survive a fork). A user's error in a process (a UserError: a
ConfigError, a DataError) is the run's, raised again in the parent, one line; the processes are
stopped when the run stops."""

import pickle
import sys
from collections.abc import Callable
from pathlib import Path
from tempfile import TemporaryDirectory

import torch
import torch.multiprocessing as mp

from transformer_mt.errors import UserError

# work(rank, world, device): the share of process `rank` of `world`, on `device`
Work = Callable[[int, int, torch.device], None]


def run_on_devices(work: Work, devices: list[torch.device], poll: Callable[[], None], every: float = 0.5) -> None:
    """`work` on each of `devices` at once, in processes of their own; `poll()` every `every` seconds
    while they run, and once after."""
    threads = max(1, torch.get_num_threads() // len(devices))
    method = "spawn" if any(device.type == "cuda" for device in devices) else "fork"
    with TemporaryDirectory(prefix="shards-") as errors:
        context = mp.start_processes(share, args=(work, devices, threads, errors), nprocs=len(devices), join=False,
                                     start_method=method)
        try:
            while not context.join(timeout=every):
                poll()
        except mp.ProcessExitedException as err:
            pickled = Path(errors, str(err.error_index))
            if pickled.is_file():  # written by share() in this run's temporary folder, for this process
                raise pickle.loads(pickled.read_bytes()) from None
            raise
        finally:
            for process in context.processes:
                if process.is_alive():
                    process.terminate()
    poll()


def share(rank: int, work: Work, devices: list[torch.device], threads: int, errors: str) -> None:
    """Process `rank`: its share of `work` with `threads` threads; a UserError is written (pickled) to
    errors/RANK for the parent, and the process exits with status 1."""
    torch.set_num_threads(threads)
    try:
        work(rank, len(devices), devices[rank])
    except UserError as err:
        Path(errors, str(rank)).write_bytes(pickle.dumps(err))
        sys.exit(1)
