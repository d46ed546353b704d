"""The server's Prometheus metrics (prometheus_client, in a registry of the app's own), served at
GET /metrics in Prometheus' text format: requests by route and status and their latency, lines
decoded and lines answered from the cache by model, each decoded batch's fill of the token budget,
the lines waiting by model, the models loaded on first use, and the seconds the decoders spent decoding (its rate over
task.inter_threads: the decode share)."""

from collections.abc import Callable
from functools import partial

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from transformer_mt.serving.batcher import Pending

ROUTES = ("/translate", "/models", "/health", "/metrics", "/")  # a route's own label; any other path: "other"
LATENCY = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)  # seconds
FILL = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)  # a batch's source tokens over task.max_tokens


class ServerMetrics:
    """What the server counts, and its exposition."""

    def __init__(self, models: list[str], waiting: Callable[[str], int], max_tokens: int) -> None:
        """`waiting(model)`: the lines waiting for a model (read when scraped)."""
        self.registry, self.max_tokens = CollectorRegistry(), max_tokens
        self.requests = Counter("transformer_mt_requests", "HTTP requests answered, by route and status",
                                ["route", "status"], registry=self.registry)
        self.latency = Histogram("transformer_mt_request_seconds", "Seconds from a request's arrival to its answer",
                                 ["route"], buckets=LATENCY, registry=self.registry)
        self.sentences = Counter("transformer_mt_sentences", "Lines decoded, by model", ["model"],
                                 registry=self.registry)
        self.cached = Counter("transformer_mt_cached_lines", "Lines answered from the translation cache, by model",
                              ["model"], registry=self.registry)
        self.fill = Histogram("transformer_mt_batch_fill", "A decoded batch's source tokens over task.max_tokens",
                              buckets=FILL, registry=self.registry)
        self.decoding = Counter("transformer_mt_decode_seconds", "Seconds the decoders spent decoding, summed "
                                "(its rate over task.inter_threads: the share of time they decode)",
                                registry=self.registry)
        self.loads = Counter("transformer_mt_model_loads", "Models loaded on their first use (task.max_loaded), "
                             "by model", ["model"], registry=self.registry)
        queue = Gauge("transformer_mt_queue_lines", "Lines waiting to be decoded, by model", ["model"],
                      registry=self.registry)
        for model in models:
            queue.labels(model).set_function(partial(waiting, model))
            self.sentences.labels(model)  # listed at 0 before the first request
            self.cached.labels(model)

    def loaded(self, model: str) -> None:
        """A model loaded on its first use."""
        self.loads.labels(model).inc()

    def request(self, path: str, status: int, seconds: float) -> None:
        """One answered HTTP request."""
        route = path if path in ROUTES else "other"
        self.requests.labels(route, str(status)).inc()
        self.latency.labels(route).observe(seconds)

    def batch(self, jobs: list[Pending], seconds: float) -> None:
        """One decoded group (the batcher's `observe`)."""
        self.fill.observe(sum(job.tokens for job in jobs) / self.max_tokens)
        self.decoding.inc(seconds)
        for job in jobs:
            self.sentences.labels(job.model).inc(len(job.lines))

    def exposition(self) -> tuple[bytes, str]:
        """The metrics in Prometheus' text format, and its content type."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
