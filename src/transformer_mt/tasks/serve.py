"""task=serve: an HTTP server translating with one or several models, each loaded once, concurrent
requests batched together under a token budget (serving/). FastAPI's app on uvicorn; SIGTERM or
Ctrl-C stops accepting, finishes the requests in flight and ends with one line (exit 143 / 130).

    python run.py task=serve ckpt_path=outputs/train/<run>/checkpoints/best.ckpt
    python run.py task=serve task.models='{en_de: a.ckpt, both: [b.ckpt, c.ckpt]}' quantize=int8 task.port=8080
"""

import ipaddress
import logging
import os
import socket
import time
from concurrent.futures import Executor
from pathlib import Path

import uvicorn
from hydra.utils import instantiate
from omegaconf import DictConfig

from transformer_mt.checkpoints.loading import task_device
from transformer_mt.errors import ConfigError
from transformer_mt.inference.ct2_engine import check_engine, ct2_translator
from transformer_mt.inference.prefix import source_tag
from transformer_mt.inference.workers import Workers, thread_counts
from transformer_mt.model.kernels import for_cpu
from transformer_mt.serving.api import Limits
from transformer_mt.serving.app import Settings, make_app
from transformer_mt.serving.batcher import decode_threads
from transformer_mt.serving.resident import ResidentModels
from transformer_mt.serving.served import Declared, ServedModel
from transformer_mt.stops import STOPS, exit_stopped, raise_requested
from transformer_mt.tasks.runs.preflight import served_checkpoints

log = logging.getLogger(__name__)
API_KEY_VARIABLE = "TRANSFORMER_MT_API_KEY"


def settings(options: DictConfig) -> Settings:
    """How the server batches and what a request may ask (task.*); the API key: task.api_key, else
    the environment's TRANSFORMER_MT_API_KEY, else none."""
    return Settings(options.max_tokens, options.max_wait_ms, Limits(options.max_lines, options.max_chars,
                                                                    options.max_beam),
                    options.get("api_key") or os.environ.get(API_KEY_VARIABLE) or None, options.max_queue,
                    options.cache_lines, options.continuous_batching)


def loopback(host: str) -> bool:
    """Whether `host` is reachable from this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def bound_socket(host: str, port: int) -> socket.socket:
    """A socket bound to host:port (port 0: a free one), or a ConfigError naming task.host / task.port.
    Its protocol is said (IPPROTO_TCP): asyncio turns Nagle's algorithm off only on such sockets'
    connections, and with it on, every answer on a kept-alive connection waited 40 ms for an ACK."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)  # so asyncio sets TCP_NODELAY
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as err:
        sock.close()
        raise ConfigError(f"task.host={host} task.port={port}: cannot listen there ({err.strerror or err})") from None
    return sock


def resident_models(cfg: DictConfig, device, workers: Workers, worker: Executor) -> ResidentModels:
    """The served models (task.models, or ckpt_path as default): each loaded now, or with
    task.max_loaded on its first request in `worker`'s threads (their checkpoints read now, without
    their weights: a file that is no checkpoint stops the server at start either way)."""
    checkpoints = served_checkpoints(cfg)
    if cfg.task.engine == "ctranslate2":
        for paths in checkpoints.values():
            check_engine(cfg, paths)

    def load(name: str) -> ServedModel:
        return load_model(cfg, name, checkpoints[name], device, workers)

    if cfg.task.max_loaded is None:
        return ResidentModels.all_loaded({name: load(name) for name in checkpoints})
    tag, target = default_languages(cfg)
    declared = {name: Declared.read(name, paths, tag, target) for name, paths in checkpoints.items()}
    return ResidentModels(declared, load, worker, cfg.task.max_loaded)


def default_languages(cfg: DictConfig) -> tuple[str | None, str | None]:
    """The source tag (task.tag or task.source_lang; both: a ConfigError) and the target code
    (task.target_lang) a request that names none decodes with."""
    return source_tag(cfg.task.get("tag"), cfg.task.get("source_lang")), cfg.task.get("target_lang")


def load_model(cfg: DictConfig, name: str, paths: list[Path], device, workers: Workers) -> ServedModel:
    """One served model loaded on `device`, decoding with cfg.decoding (by default): by our
    searches, or with task.engine=ctranslate2 by CTranslate2 (converted once; `workers`: its
    inter_threads replicas and intra_threads), what it cannot do refused here (an ensemble) or per
    request (constraints, alignments)."""
    tag, target = default_languages(cfg)
    served = ServedModel.load(name, paths, instantiate(cfg.decoding), cfg.quantize, tag, for_cpu(cfg.kernels), target)
    if cfg.task.engine == "ctranslate2":
        served.engine = ct2_translator(paths[0], served.translator, device, workers, cfg.task.get("ct2_dir"))
    else:
        log.info("%s: %s", name, served.translator.to(device).prepared())
    return served


def run(cfg: DictConfig) -> dict:
    options = cfg.task
    device = task_device(cfg.trainer)
    inter, intra = thread_counts(cfg.inter_threads, cfg.intra_threads, device)
    worker = decode_threads(inter, intra)  # the threads that load the models and decode: torch runs in no other
    models = worker.submit(resident_models, cfg, device, Workers(inter, intra), worker).result()
    app = make_app(models, settings(options), worker, inter)
    sock = bound_socket(str(options.host), int(options.port))
    host, port = sock.getsockname()[:2]
    if not loopback(str(options.host)):
        log.warning("task.host=%s: the server is open to the network, not only to this machine", options.host)
    lazy = "" if models.bound is None else f" (loaded on first use, at most {models.bound} at once)"
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on"))
    started = time.monotonic()
    try:  # uvicorn finishes the requests in flight, then raises the signal again here (stops.py: CtrlC, Terminated)
        log.info("serving %s%s on http://%s:%d (%s, %d decoder%s x %d thread%s%s; the page: /, the API: /docs)",
                 ", ".join(models.names), lazy, f"[{host}]" if ":" in host else host, port, device, inter,
                 "s" * (inter > 1), intra, "s" * (intra > 1), ", int8" if cfg.quantize == "int8" else "")
        server.run(sockets=[sock])  # a stop that comes as soon as the line above is written: handled below
        raise_requested()
    except STOPS as stop:
        log.info("served %s", app.state.batcher.report(time.monotonic() - started))
        exit_stopped(stop, f": translation requests answered: {app.state.translating.answered}, the last in "
                           "flight included")
    return {"answered": app.state.translating.answered}
