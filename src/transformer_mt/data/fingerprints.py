"""What a run's data was, as digests of the corpora's text: each corpus split hashed once (whole
files), and a split's content as checkpoints record it (for evaluation and resume to compare)."""

from collections.abc import Mapping

from transformer_mt.data.cache_entry import digest
from transformer_mt.data.corpus import Corpus
from transformer_mt.data.mixture import naming


class CorpusFingerprints:
    """The fingerprints of `corpora`'s splits, each computed once; `training`: the corpora trained on
    (weight > 0), in order; `temperature`: data.temperature, part of how they are mixed."""

    def __init__(self, corpora: Mapping[str, Corpus], training: list[str], temperature: float | None) -> None:
        self.corpora, self.training, self.temperature = corpora, training, temperature
        self.known: dict[tuple[str, str], str] = {}

    def of(self, name: str, split: str) -> str:
        """Corpus `name`'s `split` (a DataError where it has none)."""
        if (name, split) not in self.known:
            with naming(name):
                self.known[name, split] = self.corpora[name].fingerprint(split)
        return self.known[name, split]

    def content(self, split: str) -> str:
        """The split's content: for val and test, the first training corpus's (the first corpus's,
        unless that one has weight 0); for training, with several corpora (or tags, a weight, a
        temperature), each training corpus's with how it is mixed."""
        only = self.training[0]
        corpus = self.corpora[only]
        if split != "train" or (len(self.corpora) == 1 and corpus.weight == 1 and not corpus.tag
                                and not corpus.target_tag and self.temperature is None):
            return self.of(only, split)
        mixed = [(name, self.of(name, split), self.corpora[name].weight, self.corpora[name].tag,
                  *([self.corpora[name].target_tag] if self.corpora[name].target_tag else []))
                 for name in self.training]
        return digest("mixed", mixed, self.temperature)
