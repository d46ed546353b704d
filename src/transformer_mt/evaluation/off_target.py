"""The off-target rate of a model with several target languages: the share of its outputs that a
language identifier places in another of the run's target languages than the one asked for.
py3langid (a maintained langid.py, whose model ships inside its package: no download) decides among
the run's target languages only, so a short or ambiguous line falls to the closest of them."""

import re
from functools import lru_cache

from py3langid.langid import MODEL_FILE, LanguageIdentifier

# NLLB-200's codes (ISO 639-3 and a script) of the languages py3langid names by ISO 639-1
NLLB_LANGUAGES = {
    "afr": "af", "amh": "am", "arb": "ar", "asm": "as", "azj": "az", "bak": "ba", "bel": "be", "bul": "bg",
    "ben": "bn", "bos": "bs", "cat": "ca", "ces": "cs", "cym": "cy", "dan": "da", "deu": "de", "dzo": "dz",
    "ell": "el", "eng": "en", "epo": "eo", "spa": "es", "est": "et", "eus": "eu", "pes": "fa", "fin": "fi",
    "fao": "fo", "fra": "fr", "gle": "ga", "gla": "gd", "glg": "gl", "guj": "gu", "hau": "ha", "heb": "he",
    "hin": "hi", "hrv": "hr", "hat": "ht", "hun": "hu", "hye": "hy", "ind": "id", "ibo": "ig", "isl": "is",
    "ita": "it", "jpn": "ja", "jav": "jv", "kat": "ka", "kaz": "kk", "khm": "km", "kan": "kn", "kor": "ko",
    "kmr": "ku", "kir": "ky", "ltz": "lb", "lug": "lg", "lin": "ln", "lao": "lo", "lit": "lt", "lvs": "lv",
    "plt": "mg", "mkd": "mk", "mal": "ml", "khk": "mn", "mar": "mr", "zsm": "ms", "mlt": "mt", "mya": "my",
    "npi": "ne", "nld": "nl", "nno": "nn", "nob": "no", "oci": "oc", "gaz": "om", "ory": "or", "pan": "pa",
    "pol": "pl", "pbt": "ps", "por": "pt", "quy": "qu", "ron": "ro", "rus": "ru", "kin": "rw", "san": "sa",
    "sin": "si", "slk": "sk", "slv": "sl", "sna": "sn", "som": "so", "als": "sq", "srp": "sr", "sot": "st",
    "swe": "sv", "swh": "sw", "tam": "ta", "tel": "te", "tgk": "tg", "tha": "th", "tuk": "tk", "tgl": "tl",
    "tur": "tr", "tat": "tt", "uig": "ug", "ukr": "uk", "urd": "ur", "uzn": "uz", "vie": "vi", "xho": "xh",
    "yor": "yo", "zho": "zh", "yue": "yue", "zul": "zu",
}
M2M100_CODE = re.compile(r"__([a-z]{2,3})__")
NLLB_CODE = re.compile(r"([a-z]{3})_[A-Z][a-z]{3}")


def code_language(code: str) -> str | None:
    """The language py3langid names for a model's language code: M2M-100's `__de__` is de, NLLB's
    `deu_Latn` de too (NLLB_LANGUAGES; a code py3langid names itself, as ace_Latn: itself); None for
    a code of neither form or a language it does not know."""
    if found := M2M100_CODE.fullmatch(code):
        name = found[1]
    elif found := NLLB_CODE.fullmatch(code):
        name = NLLB_LANGUAGES.get(found[1], found[1])
    else:
        return None
    return name if name in known_languages() else None


def scored_languages(languages: dict[str, str | None], codes: dict[str, str]) -> dict[str, str]:
    """Each corpus's target language, when they are several that py3langid knows (else none): its
    target code's (`codes`: corpus name -> target_tag, as __de__ or deu_Latn) where it names one,
    else `languages`' (its tgt_lang)."""
    found = {name: code_language(codes[name]) if name in codes and code_language(codes[name]) else language
             for name, language in languages.items()}
    if None in found.values() or len(set(found.values())) < 2:
        return {}
    return found if set(found.values()) <= known_languages() else {}


def language_codes(codes: tuple[str, ...] | list[str]) -> dict[str, str]:
    """Each language py3langid names among a model's codes, and its code (the first for a language
    with several: zho_Hans before zho_Hant)."""
    found: dict[str, str] = {}
    for code in sorted(codes):
        if (language := code_language(code)) is not None:
            found.setdefault(language, code)
    return found


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
