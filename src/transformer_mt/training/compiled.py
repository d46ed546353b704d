"""module.compile: the training step compiled by regions (one encoder layer, one decoder layer,
the output layer + loss of one chunk), so that a run compiles a few small graphs, once."""

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch._dynamo.exc import FailOnRecompileLimitHit

from transformer_mt.errors import ConfigError, UserError
from transformer_mt.model.transformer import Runners
from transformer_mt.training.loss import chunk_loss


def compiled_encoder_layer(layer: torch.nn.Module, *args, **kwargs) -> torch.Tensor:
    """An encoder layer's call: module.compile compiles this function, one graph for every layer.
    (Two functions with the same body, not one: torch.compile keeps its graphs per function, so
    each region has its own cache, recompilation limit and count.)"""
    return layer(*args, **kwargs)


def compiled_decoder_layer(layer: torch.nn.Module, *args, **kwargs) -> torch.Tensor:
    """A decoder layer's call: module.compile compiles this function, one graph for every layer."""
    return layer(*args, **kwargs)


class RecompileLimitHit(UserError):
    """A compiled region was compiled again more often than torch allows (fullgraph: a hard failure)."""


def stop_at_recompile_limit(region: str, fn: Callable) -> Callable:
    """`fn` (a compiled region), with torch's hard failure at its recompile limit made one line. The
    reason of every recompilation is logged as it happens (`compiled_step` turns torch's
    `recompiles` log on), so the line points there."""

    def call(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except FailOnRecompileLimitHit:
            limit = torch._dynamo.config.recompile_limit
            raise RecompileLimitHit(
                f"module.compile: the {region} was compiled more than its limit (torch._dynamo.config."
                f"recompile_limit={limit}; with data.shape_grid K, K + 1), so torch stopped; the log above gives "
                "each recompilation's reason. Train "
                "with module.compile=false (resume from checkpoints/last.ckpt), or report the reason") from None

    return call


@dataclass(frozen=True)
class CompiledStep:
    """module.compile's regions of the training step: how the stacks call their layers, and the
    output layer + loss of one chunk."""

    runners: Runners
    chunk: Callable




def compiled_step(backend: bool | str, shape_grid: int | None = None, mode: str | None = None) -> CompiledStep | None:
    """Regional compilation with `backend` (True: inductor; False: None, the eager step): one
    encoder layer, one decoder layer and the loss's chunk. The parameters are graph inputs, so the
    layers of a stack share one graph; lengths are dynamic, and without duck sizing (a first
    batch whose source and target lengths happen to be equal would give both one symbol, and the
    first batch where they differ would compile again); the chunk has one fixed shape. So a run
    compiles three graphs whatever its batch shapes. Embeddings and the final LayerNorm stay eager.
    Should a region compile again all the same, torch's `recompiles` log says why, and its hard
    failure at the recompile limit (fullgraph) stops the run with one line (`RecompileLimitHit`).

    shape_grid K (data.shape_grid: batches of at most K shapes): the layers on static shapes
    instead (dynamic=False), one graph per shape, a recompile limit of K + 1 per region; mode
    (module.compile_mode, inductor's): reduce-overhead records each graph as a CUDA graph on a GPU
    (static shapes are what CUDA graphs replay; on a CPU inductor skips them)."""
    if backend is False:
        return None
    backend = "inductor" if backend is True else backend
    if backend not in torch.compiler.list_backends(exclude_tags=()):
        raise ConfigError(f"module.compile={backend!r}: not a torch.compile backend "
                          f"({', '.join(torch.compiler.list_backends(exclude_tags=()))})")
    no_duck_sizing = torch.fx.experimental._config.patch(use_duck_shape=False)
    torch._logging.set_logs(recompiles=True)
    options = {"backend": backend, "fullgraph": True, **({"mode": mode} if mode else {})}
    limit = shape_grid + 1 if shape_grid else None  # one graph per shape, and one spare

    def layers(region: str, fn: Callable) -> Callable:
        if shape_grid:
            return stop_at_recompile_limit(region, torch.compile(fn, dynamic=False, recompile_limit=limit, **options))
        return stop_at_recompile_limit(region, no_duck_sizing(torch.compile(fn, dynamic=True, **options)))

    chunk = torch.compile(chunk_loss, dynamic=False, **options)
    return CompiledStep(Runners(layers("encoder layer", compiled_encoder_layer),
                                layers("decoder layer", compiled_decoder_layer)),
                        stop_at_recompile_limit("output layer + loss chunk", chunk))
