"""The embedded toy corpus: a deterministic synthetic language pair generated in code.

`mode="reorder"` (default) is a real transduction: the source is an English-like SVO language
with adjectives before nouns; the target is a made-up SOV language with its own words, adjectives
after the noun and the verb at the end of each clause. Learning it needs a vocabulary mapping
and reordering. `mode="copy"` is the classic copy task (target = source).
"""

import random

from transformer_mt.data.corpus import CORPUS_KEY, CleanPairs, Corpus, in_chunks
from transformer_mt.validate import check, one_of

DETERMINERS = {"the": "lo", "a": "na", "every": "kadu", "some": "rim", "this": "vel", "no": "zun"}
NOUNS = {
    "dog": "hund", "cat": "miska", "bird": "tori", "fish": "pesk", "horse": "kaval", "child": "nino",
    "teacher": "mestra", "farmer": "agri", "king": "rega", "queen": "regina", "boat": "navi",
    "house": "domo", "tree": "arbo", "river": "flu", "stone": "lito", "apple": "pomi",
    "book": "libra", "song": "kanta", "city": "urbo", "garden": "horto", "baker": "panis",
    "sailor": "marin", "wolf": "lupo", "mountain": "monto",
}
ADJECTIVES = {
    "big": "gran", "small": "pik", "red": "ruba", "green": "verda", "old": "vetu", "young": "juna",
    "happy": "feli", "quiet": "kalma", "fast": "rapi", "dark": "obska", "bright": "klara", "tall": "alta",
}
VERBS = {
    "sees": "vidas", "finds": "trovas", "likes": "amas", "follows": "sekvas", "carries": "portas",
    "paints": "pentras", "hears": "audas", "visits": "vizitas", "builds": "konstras", "wants": "volas",
}
ADVERBS = {"today": "hodia", "quickly": "rapide", "often": "ofte", "again": "denove", "slowly": "lante"}
CONJUNCTION = ("and", "kaj")


def _noun_phrase(rng: random.Random) -> tuple[list[str], list[str]]:
    det, noun = rng.choice(list(DETERMINERS)), rng.choice(list(NOUNS))
    adjectives = rng.sample(list(ADJECTIVES), k=rng.choice([0, 0, 1, 1, 2]))
    src = [det, *adjectives, noun]
    tgt = [DETERMINERS[det], NOUNS[noun], *(ADJECTIVES[a] for a in reversed(adjectives))]
    return src, tgt


def _clause(rng: random.Random) -> tuple[list[str], list[str]]:
    """S V O [adv]  ->  S' O' V' [adv']  (verb-final, post-nominal adjectives)."""
    subj_s, subj_t = _noun_phrase(rng)
    obj_s, obj_t = _noun_phrase(rng)
    verb = rng.choice(list(VERBS))
    src, tgt = [*subj_s, verb, *obj_s], [*subj_t, *obj_t, VERBS[verb]]
    if rng.random() < 0.3:
        adverb = rng.choice(list(ADVERBS))
        src.append(adverb)
        tgt.insert(0, ADVERBS[adverb])  # the target puts adverbs first
    return src, tgt


def toy_pair(rng: random.Random, mode: str) -> tuple[str, str]:
    src, tgt = _clause(rng)
    if rng.random() < 0.25:
        src2, tgt2 = _clause(rng)
        src, tgt = [*src, CONJUNCTION[0], *src2], [*tgt, CONJUNCTION[1], *tgt2]
    if mode == "copy":
        tgt = src
    return " ".join(src), " ".join(tgt)


class ToyCorpus(Corpus):
    """Deterministic train / val / test splits; val and test sentences never occur in train."""

    def __init__(self, mode: str = "reorder", num_train: int = 10000, num_val: int = 300, num_test: int = 300,
                 seed: int = 0, weight: float = 1.0, tag: str | None = None,
                 target_tag: str | None = None) -> None:
        self.weight, self.tag, self.target_tag = weight, tag, target_tag
        check(f"{CORPUS_KEY}.mode", mode, one_of("reorder", "copy"), "reorder or copy")
        self.mode, self.seed = mode, seed
        self.sizes = {"train": num_train, "val": num_val, "test": num_test}
        self._splits: dict[str, list[tuple[str, str]]] | None = None

    def _generate(self) -> dict[str, list[tuple[str, str]]]:
        rng = random.Random(self.seed)
        seen: set[str] = set()
        splits = {}
        for split in ("train", "val", "test"):
            pairs = []
            while len(pairs) < self.sizes[split]:
                src, tgt = toy_pair(rng, self.mode)
                if src not in seen:
                    seen.add(src)
                    pairs.append((src, tgt))
            splits[split] = pairs
        return splits

    def fingerprint(self, split: str) -> str:
        """Generated data: the options are the content."""
        return f"toy-v1:{self.mode}:{self.seed}:{self.sizes['train']}:{self.sizes['val']}:{self.sizes['test']}:{split}"

    def pairs(self, split: str) -> CleanPairs:
        if self._splits is None:
            self._splits = self._generate()
        pairs = self._splits[split]
        return CleanPairs(in_chunks([s for s, _ in pairs], [t for _, t in pairs]), f"toy/{split}", filter_empty=False,
                          size=lambda: len(pairs))


    def location(self, split: str, index: int) -> str:
        """Where pair `index` (from 0) of a split comes from: toy corpus SPLIT sentence INDEX+1."""
        return f"toy corpus {split} sentence {index + 1}"
