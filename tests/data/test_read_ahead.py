"""read_ahead: the items of an iterable made by a thread of their own (data preparation reads the
next chunk and encodes it while the last one is written), in order, the maker's error raised where
its item was expected, and the thread stopped when the consumer stops."""

import threading
import time

import pytest

from transformer_mt.data.encoding import read_ahead
from transformer_mt.errors import DataError


def test_items_come_in_order_and_the_makers_error_where_its_item_was_expected():
    assert list(read_ahead(iter(range(1000)), depth=2)) == list(range(1000))

    def stream():
        yield "line 1"
        raise DataError("corpus.en:2: NUL byte (is this a binary file?)")

    items = read_ahead(stream())
    assert next(items) == "line 1"
    with pytest.raises(DataError, match=r"^corpus.en:2: NUL byte"):
        next(items)


def test_a_consumer_that_stops_early_stops_the_thread():
    made = []

    def endless():
        while True:
            made.append(len(made))
            yield made[-1]

    before = threading.active_count()
    items = read_ahead(endless(), depth=2)
    assert [next(items) for _ in range(3)] == [0, 1, 2]
    items.close()
    deadline = time.monotonic() + 5
    while threading.active_count() > before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert threading.active_count() == before  # the maker ended
    assert len(made) <= 3 + 2 + 2  # what was consumed, the queue's depth, and the item in the maker's hands
