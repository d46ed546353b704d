"""The server's Prometheus metrics (serving/prometheus.py), read back with prometheus_client's own
parser: each figure is what was counted, by hand."""

from prometheus_client.parser import text_string_to_metric_families

from transformer_mt.serving.batcher import Pending
from transformer_mt.serving.prometheus import ServerMetrics


def samples(metrics: ServerMetrics) -> dict[tuple, float]:
    """Each sample of the exposition by (name, its labels as sorted pairs)."""
    content, media_type = metrics.exposition()
    assert media_type.startswith("text/plain; version=")
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(content.decode()) for s in family.samples}


def test_each_figure_is_what_was_counted():
    waiting = {"en_de": 7, "de_en": 0}
    metrics = ServerMetrics(list(waiting), waiting.get, max_tokens=100)
    metrics.request("/translate", 200, 0.02)
    metrics.request("/translate", 200, 0.3)
    metrics.request("/translate", 503, 0.001)
    metrics.request("/no/such/route", 404, 0.001)
    metrics.batch([Pending("k", ["a", "b"], 30, model="en_de"), Pending("k", ["c"], 20, model="en_de")], 0.25)
    metrics.batch([Pending("k", ["d"], 95, model="de_en")], 0.5)
    metrics.loaded("de_en")
    got = samples(metrics)
    assert got[("transformer_mt_requests_total", (("route", "/translate"), ("status", "200")))] == 2
    assert got[("transformer_mt_requests_total", (("route", "/translate"), ("status", "503")))] == 1
    assert got[("transformer_mt_requests_total", (("route", "other"), ("status", "404")))] == 1
    assert got[("transformer_mt_request_seconds_count", (("route", "/translate"),))] == 3
    assert got[("transformer_mt_request_seconds_bucket", (("le", "0.025"), ("route", "/translate")))] == 2
    assert got[("transformer_mt_sentences_total", (("model", "en_de"),))] == 3
    assert got[("transformer_mt_sentences_total", (("model", "de_en"),))] == 1
    assert got[("transformer_mt_batch_fill_count", ())] == 2
    assert got[("transformer_mt_batch_fill_sum", ())] == 0.5 + 0.95
    assert got[("transformer_mt_batch_fill_bucket", (("le", "0.5"),))] == 1
    assert got[("transformer_mt_decode_seconds_total", ())] == 0.75
    assert got[("transformer_mt_queue_lines", (("model", "en_de"),))] == 7
    assert got[("transformer_mt_model_loads_total", (("model", "de_en"),))] == 1
    waiting["en_de"] = 0  # read when scraped
    assert samples(metrics)[("transformer_mt_queue_lines", (("model", "en_de"),))] == 0
