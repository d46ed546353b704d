"""The off-target rate of a model with several target languages: the share of its outputs that a
language identifier places in another of the run's target languages than the one asked for.
py3langid (a maintained langid.py, whose model ships inside its package: no download) decides among
the run's target languages only, so a short or ambiguous line falls to the closest of them."""

from functools import lru_cache

from py3langid.langid import MODEL_FILE, LanguageIdentifier


@lru_cache(maxsize=4)
def identifier(languages: tuple[str, ...]) -> LanguageIdentifier:
    """py3langid's identifier restricted to `languages` (loaded once per process: about a second)."""
    found = LanguageIdentifier.from_model_file(MODEL_FILE)
    found.set_languages(list(languages))
    return found


def identified(text: str, languages: tuple[str, ...]) -> tuple[str, float]:
    """The one of `languages` py3langid places `text` in, and its probability among them (0-1)."""
    return normalized(languages).classify(text)


@lru_cache(maxsize=4)
def normalized(languages: tuple[str, ...]) -> LanguageIdentifier:
    """py3langid's identifier restricted to `languages`, giving probabilities (loaded once per set)."""
    found = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    found.set_languages(list(languages))
    return found


@lru_cache(maxsize=1)
def known_languages() -> frozenset[str]:
    """The language codes py3langid's model knows (ISO 639-1: en, de, fr, cs, ...)."""
    return frozenset(LanguageIdentifier.from_model_file(MODEL_FILE).nb_classes)


def off_target_rate(lines: list[str], language: str, languages: tuple[str, ...]) -> float:
    """The share (0-100) of `lines` identified as one of `languages` other than `language`; an
    empty line is in no language, so it is not off target."""
    if language not in languages:
        raise ValueError(f"{language!r} is not among the languages {languages}")
    decide = identifier(tuple(sorted(languages))).classify
    off = sum(decide(line)[0] != language for line in lines if line.strip())
    return 100.0 * off / max(len(lines), 1)
