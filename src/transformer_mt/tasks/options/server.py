"""The task group's server: task=serve, an HTTP API (and a page to try it) over one or several
models, each loaded once, with requests batched together under a token budget."""

from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig

from transformer_mt.schema.keys import key
from transformer_mt.schema.shared import Engined, Languaged
from transformer_mt.schema.task_base import ServedModels, Task
from transformer_mt.tasks.options.one_model import NAME
from transformer_mt.validate import AT_LEAST_0, AT_LEAST_1, BOOLEAN, Refusal, integer, text

MODELS = (lambda v: v is None or (hasattr(v, "items") and all(text(k) for k in v)),
          "a mapping of names to checkpoints ({en_de: a.ckpt, ensemble: [b.ckpt, c.ckpt]}) or null")


@dataclass
class ServeTask(Languaged, Engined, Task):
    """python run.py task=serve ckpt_path=PATH | task.models={NAME: PATH, ...} [task.port=8000] [decoding=beam]
    [quantize=int8]: an HTTP server on task.host (POST /translate, GET /models, /health, /metrics, /docs; a page at /;
    LibreTranslate's API under /libretranslate, POST /v1/translations) that batches concurrent requests together;
    SIGTERM or Ctrl-C finishes the requests in flight and stops."""

    name: Any = key("serve", NAME)
    models: Any = key(None, "the models served by name, each a checkpoint or a list (an ensemble); null: "
                            "ckpt_path, served as `default`", MODELS, nullable=True)
    host: Any = key("127.0.0.1", "the address to listen on; anything but loopback (127.0.0.1, ::1, localhost) "
                                 "opens the server to the network, said in the log", (text, "an address"))
    port: Any = key(8000, "the port to listen on (0: a free one, said in the log)", (integer(0, 65535),
                                                                                   "an integer from 0 to 65535"))
    max_tokens: Any = key(4096, "source tokens of the lines decoded together in one batch (lines of any "
                                "request, a large request's over several batches)", AT_LEAST_1)
    max_wait_ms: Any = key(5, "how long the first request of a batch waits for others (milliseconds)",
                           AT_LEAST_0)
    max_queue: Any = key(1024, "lines that may wait to be decoded, per model: a request that would pass it is "
                               "answered 503 with Retry-After (null: no bound)", AT_LEAST_1, nullable=True)
    cache_lines: Any = key(10000, "lines kept decoded, by model, decoding and text: a line found there is answered "
                                  "without decoding (0: none kept; a search that samples: never)", AT_LEAST_0)
    max_loaded: Any = key(None, "models kept loaded at once: each loaded on its first request, the least recently "
                                "used unloaded to make room (null: every model loaded at start)", AT_LEAST_1,
                          nullable=True)
    continuous_batching: Any = key(False, "greedy requests join the batch being decoded between its steps, each "
                                          "sentence leaving it the step it ends (false: a batch is decoded to its end "
                                          "while new requests wait; docs/serving.md has both measured)", BOOLEAN)
    max_lines: Any = key(64, "lines one request may send", AT_LEAST_1)
    max_chars: Any = key(10000, "characters one request may send, all its lines together", AT_LEAST_1)
    max_beam: Any = key(16, "the largest beam_size (and nbest) a request may ask for", AT_LEAST_1)
    api_key: Any = key(None, "a key every request but GET /health must send (header X-API-Key, or Authorization: "
                             "Bearer KEY); null: the environment's TRANSFORMER_MT_API_KEY, else none",
                       (text, "a non-empty string or null"), nullable=True)

    reads = (ServedModels(),)
    shortlisted = False

    @staticmethod
    def run_refusal(cfg: DictConfig) -> Refusal:
        """The models served: ckpt_path's (as default) or task.models', one way."""
        if cfg.task.get("models") and cfg.get("ckpt_path"):
            return ("task=serve takes ckpt_path=PATH (one model, served as default) or task.models={NAME: PATH, ...}, "
                    "not both")
        return None

    @staticmethod
    def runner(cfg: DictConfig) -> dict | None:  # its module's run
        from transformer_mt.tasks.serve import run
        return run(cfg)
