"""The length test's segments and groups (evaluation/lengths.py): sentences joined n at a time with
none left out, and the buckets of source length."""

from transformer_mt.evaluation.lengths import bucket_names, bucket_of, groups, joined, segments

SOURCES = [f"s{i}" + " w" * i for i in range(1, 8)]  # line i has i + 1 words
REFERENCES = [f"r{i}" for i in range(1, 8)]


def test_sentences_are_joined_in_consecutive_groups_and_the_last_shorter_group_is_kept():
    triples = joined(SOURCES, REFERENCES, 3)
    assert [(s.first_line, s.reference) for s in triples] == [(1, "r1 r2 r3"), (4, "r4 r5 r6"), (7, "r7")]
    assert triples[0].source == "s1 w s2 w w s3 w w w" and triples[0].words == 2 + 3 + 4
    assert [s.words for s in triples] == [9, 5 + 6 + 7, 8]
    assert [s.joins for s in segments(SOURCES, REFERENCES, [1, 2])] == [1] * 7 + [2] * 4


def test_buckets_take_the_sources_up_to_their_edge_and_the_last_one_every_longer_one():
    assert bucket_names([15, 30]) == ["1-15", "16-30", "31+"]
    assert [bucket_of(words, [15, 30]) for words in (1, 15, 16, 30, 31, 400)] == [0, 0, 1, 1, 2, 2]
    items = segments(SOURCES, REFERENCES, [1, 3])  # words: 2 ... 8, then 9, 18, 8
    named = groups(items, [4, 8])
    assert named == {"x1": [0, 1, 2, 3, 4, 5, 6], "x3": [7, 8, 9], "1-4": [0, 1, 2], "5-8": [3, 4, 5, 6, 9],
                     "9+": [7, 8]}
    assert "9+" not in groups(items[:7], [4, 8]) and list(groups(items[:7], [4, 8])) == ["x1", "1-4", "5-8"]
