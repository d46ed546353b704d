"""experiments/benchmarks/serve_load.py: a level's figures computed by hand (nearest-rank p99, the
median, sentences per second counting answered requests only)."""

from tests.helpers import load_script

load = load_script("experiments/benchmarks/serve_load.py")


def test_nearest_rank_percentile():
    values = [float(v) for v in range(1, 201)]  # 1 .. 200
    assert load.percentile(values, 0.99) == 198.0 and load.percentile(values, 0.5) == 100.0
    assert load.percentile([5.0, 1.0, 3.0], 0.99) == 5.0 and load.percentile([2.0], 0.99) == 2.0


def test_a_level_counts_answered_requests_and_its_errors_apart():
    level = load.summary(16, [0.1, 0.2, 0.3, 0.4], seconds=2.0, errors=1, mixups=0)
    assert level == {"clients": 16, "requests": 5, "sentences_per_s": 2.0, "p50_ms": 250.0, "p99_ms": 400.0,
                     "errors": 1, "mixups": 0}
