"""A model the server serves: its Translator (the configured decoding, the int8 rule), what GET
/models says of it, and how a request's options become a search, by what the configured search
declares (decoding/strategy.py). A request's search runs with the served decoding's `options`
(length limits, the n-gram ban); a model with several target languages (corpora tagged by
direction) flags outputs the language identifier places in another one."""

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from transformer_mt.data.text import clean
from transformer_mt.data.tokenizer import Vocabularies
from transformer_mt.decoding import BeamSearch, GreedySearch, PowerLength
from transformer_mt.decoding.strategy import Search
from transformer_mt.errors import ConfigError
from transformer_mt.inference.engine import Engine
from transformer_mt.inference.members import load_members, read_model, shared_vocabularies
from transformer_mt.inference.pharaoh import Alignments
from transformer_mt.inference.translator import Translator
from transformer_mt.model.kernels import Kernels
from transformer_mt.serving.api import Limits, RequestError, TranslateRequest, checked_beam

SearchKey = tuple  # what decides how a batch is decoded: requests with equal keys decode together


@dataclass(frozen=True)
class Declared:
    """What a served model's checkpoints say before the model is built: its name, files, target
    languages by tag, default tag and directions (serving/resident.py: a model loaded on first use),
    the language codes its vocabulary holds (M2M-100's, NLLB's: its tags) and the default target code."""

    name: str
    paths: list[Path]
    languages: dict[str | None, str]
    default_tag: str | None
    directions: dict[tuple[str, str], str | None]
    codes: tuple[str, ...] = ()
    default_target: str | None = None

    @classmethod
    def of(cls, name: str, paths: list[Path], hyper: dict, vocabularies: Vocabularies,
           default_tag: str | None, default_target: str | None = None) -> "Declared":
        """From the first checkpoint's hyper-parameters; a default tag or target code the vocabulary
        lacks: refused."""
        vocabularies.source_prefix(default_tag, "task.tag")
        vocabularies.target_prefix(default_target, "task.target_lang")
        data = ((hyper.get("data") or {}).get("config") or {})
        return cls(name, paths, target_languages(data), default_tag, directions(data),
                   tuple(vocabularies.tgt.tag_tokens()), default_target)

    @classmethod
    def read(cls, name: str, paths: list[Path], default_tag: str | None, default_target: str | None = None
             ) -> "Declared":
        """From the checkpoints themselves, memory-mapped: their weights are not read."""
        checkpoints = [read_model(path) for path in paths]
        return cls.of(name, paths, checkpoints[0]["hyper_parameters"], shared_vocabularies(paths, checkpoints),
                      default_tag, default_target)

    def info(self) -> dict:
        """What GET /models says of the model before it is loaded."""
        return {"name": self.name, "checkpoints": [p.name for p in self.paths], "default_tag": self.default_tag,
                "languages": {str(k): v for k, v in self.languages.items()},
                "directions": [f"{source}-{target}" for source, target in self.directions],
                "language_codes": list(self.codes), "default_target_lang": self.default_target}


@dataclass
class ServedModel:
    """One served model (a checkpoint, or an ensemble's members) and what it was trained on."""

    name: str
    translator: Translator
    paths: list[Path]
    languages: dict[str | None, str] = field(default_factory=dict)  # a source tag (None: none) -> its target
    default_tag: str | None = None
    directions: dict[tuple[str, str], str | None] = field(default_factory=dict)  # (source, target) -> its tag
    engine: Engine | None = None  # what decodes (task.engine=ctranslate2: CTranslate2); None: the translator
    codes: tuple[str, ...] = ()  # the target vocabulary's language codes (its tags)
    default_target: str | None = None  # the target code a request without target_lang decodes to (task.target_lang)

    @property
    def decoder(self) -> Engine:
        """The engine the batches decode with: CTranslate2's, or our translator."""
        return self.engine or self.translator

    @classmethod
    def load(cls, name: str, paths: list[Path], search, quantize: str, default_tag: str | None,
             kernels: Kernels | None = None, default_target: str | None = None) -> "ServedModel":
        """The model of the checkpoints at `paths`, decoding with `search` on `kernels` (model/kernels.py;
        None: torch's paths), on the CPU."""
        models, vocabularies, hyper = load_members(paths)
        declared = Declared.of(name, paths, hyper, vocabularies, default_tag, default_target)
        translator = Translator(models, vocabularies, search, quantize, kernels=kernels)
        return cls(name, translator, paths, declared.languages, default_tag, declared.directions,
                   codes=declared.codes, default_target=default_target)

    def declared(self) -> Declared:
        """What its checkpoints say of it (as before it was loaded)."""
        return Declared(self.name, self.paths, self.languages, self.default_tag, self.directions, self.codes,
                        self.default_target)

    def tag_of(self, asked: str | None, source_lang: str | None = None) -> str | None:
        """The source tag a request decodes with: the one it asks for (`tag`, or its `source_lang`
        code; both: a RequestError), else the model's default."""
        if asked is not None and source_lang is not None:
            raise RequestError("source_lang", "tag and source_lang both name the token put before the source: "
                                              "give one")
        asked = source_lang if source_lang is not None else asked
        return asked if asked is not None else self.default_tag

    def target_prefix(self, target_lang: str | None) -> tuple[int, ...]:
        """The ids every output of a request starts with: its target_lang's code (else the model's
        default; a code the model lacks: a RequestError naming target_lang)."""
        try:
            code = target_lang if target_lang is not None else self.default_target
            return tuple(self.translator.tokenizer.target_prefix(code, "target_lang"))
        except ConfigError as err:
            raise RequestError("target_lang", str(err)) from None

    def refuse_unsupported(self, constrained: bool, alignments: bool) -> None:
        """A RequestError naming what the engine cannot give (CTranslate2: constraints, alignments)."""
        declared = self.decoder.capabilities
        for field_name, asked, able, lacks in (("constraints", constrained, declared.constraints,
                                                "has no constrained search"),
                                               ("alignments", alignments, declared.alignments, "gives no alignments")):
            if asked and not able:
                raise RequestError(field_name, f"model={self.name} decodes with CTranslate2 (task.engine=ctranslate2), "
                                               f"which {lacks}")

    def source_prefix(self, tag: str | None) -> list[int]:
        """The ids of `tag` put before each source (a RequestError naming `tag` if the model lacks it)."""
        try:
            return self.translator.tokenizer.source_prefix(tag, "tag")
        except ConfigError as err:
            raise RequestError("tag", str(err)) from None

    def source_ids(self, lines: list[str], source_prefix: list[int]) -> list[list[int]]:
        """Each of a request's lines as the model reads it (`source_prefix` first, EOS last; an
        empty line []): tokenized once, as it arrives (its length the budget in a batch, its ids
        what decodes); a line longer than the model takes is a RequestError naming it (text[i])."""
        cleaned, limit = clean(lines)[0], self.translator.max_positions
        todo = [i for i, line in enumerate(cleaned) if line]
        src = self.translator.tokenizer.encode_sources([cleaned[i] for i in todo], source_prefix)
        out: list[list[int]] = [[] for _ in lines]
        for i, ids in zip(todo, src):
            if len(ids) >= limit:
                raise RequestError("text", f"text[{i}]: {len(ids)} tokens, more than the model's "
                                           f"max_positions={limit} allows")
            out[i] = ids
        return out

    def pieces(self, sentence: str, source_prefix: list[int]) -> list[str]:
        """`sentence` as the model takes it: itself, or where it is longer than max_positions allows,
        cut between words into pieces that fit (each word's tokens counted alone; a word longer than
        the model takes is still one piece, which the request's check refuses)."""
        limit, tokenizer = self.translator.max_positions, self.translator.tokenizer
        if len(sentence) + len(source_prefix) + 1 < limit:  # a token has a character at least: it fits
            return [sentence]
        if len(tokenizer.encode_sources([sentence], source_prefix)[0]) < limit:
            return [sentence]
        words = sentence.split()
        sizes = [len(ids) - 1 for ids in tokenizer.encode_sources(words)]  # each word's tokens, EOS aside
        room, pieces, current, used = limit - len(source_prefix) - 2, [], [], 0
        for word, size in zip(words, sizes):
            if current and used + size > room:
                pieces.append(" ".join(current))
                current, used = [], 0
            current.append(word)
            used += size
        return [*pieces, " ".join(current)]

    def target_language(self, tag: str | None, target_prefix: tuple[int, ...]) -> str | None:
        """The language a request's outputs should be in: its target code's (M2M-100's __de__, NLLB's
        deu_Latn: evaluation/off_target.code_language), else its tag's by the training corpora."""
        if not target_prefix:
            return self.languages.get(tag)
        from transformer_mt.evaluation.off_target import code_language  # py3langid: for a model that needs it

        return code_language(self.translator.tokenizer.tgt.tokens(list(target_prefix[:1]))[0])

    def off_target(self, outputs: list[str], language: str | None) -> list[bool | None]:
        """Whether the language identifier places each output in another of the model's target
        languages (its corpora's, and those of its language codes) than `language` (None each: no
        language to check against)."""
        if language is None or not outputs:
            return [None] * len(outputs)
        from transformer_mt.evaluation.off_target import code_language, identifier

        languages = {*self.languages.values(), *map(code_language, self.codes), language} - {None}
        decide = identifier(tuple(sorted(languages))).classify
        return [bool(text.strip()) and decide(text)[0] != language for text in outputs]

    def search(self, request: TranslateRequest, limits: Limits, constrained: bool = False
               ) -> tuple[SearchKey, Search]:
        """The search a request asks for (its key, and the search object), checked against `limits`
        (`constrained`: it gives constraints, which beam search alone takes), by what the configured
        search declares: beams (its beam options the defaults), random (sampling: kept as configured
        unless the request names another search), neither (greedy)."""
        default = self.translator.search
        declared = default.capabilities
        greedy = not (declared.beams or declared.random)
        beam_options = any(v is not None for v in (request.beam_size, request.nbest, request.length_penalty))
        kind = request.search or ("beam" if declared.beams or beam_options else "greedy" if greedy else None)
        if kind is None:  # the configured search is another (sampling): as configured
            if beam_options or (constrained and not declared.constraints):
                raise RequestError("search", "this model samples (decoding=sample): give search=greedy or "
                                             "search=beam with beam options")
            return ("configured",), default
        if constrained and kind != "beam":
            raise RequestError("constraints", "constraints need beam search (search=beam, or a beam option)")
        beam, nbest = checked_beam(request, kind, default.beam_size if declared.beams else 4, limits)
        if kind == "greedy":
            return ("greedy",), (default if greedy else GreedySearch(default.options))
        norm = default.length_norm if declared.beams else PowerLength()
        if request.length_penalty is not None:
            norm = dataclasses.replace(norm, alpha=request.length_penalty)
        if declared.beams and (beam, nbest, norm) == (default.beam_size, default.nbest, default.length_norm):
            return ("beam", beam, nbest, norm), default
        return ("beam", beam, nbest, norm), BeamSearch(beam, norm, nbest, default.options)

    def alignments(self) -> Alignments:
        """Word alignments from the last decoder layer's cross-attention, its heads averaged (the
        defaults of task=translate's task.alignment)."""
        return Alignments.from_options({"alignment": True}, self.translator.models[0])

    def info(self) -> dict:
        """What GET /models says of the model."""
        translator, tokenizer = self.translator, self.translator.tokenizer
        config = translator.models[0].config
        default, declared = translator.search, translator.search.capabilities
        return {**self.declared().info(), "members": len(translator.models),
                "quantize": translator.quantize, "engine": "ours" if self.engine is None else "ctranslate2",
                "parameters": sum(p.numel() for p in translator.models[0].parameters()),
                "vocabulary": {"joint": tokenizer.joint, "source": tokenizer.src.vocab_size,
                               "target": tokenizer.tgt.vocab_size},
                "tags": tokenizer.src.tag_tokens(), "max_positions": config.max_positions,
                "decoding": {"search": type(default).__name__,
                             "beam_size": default.beam_size if declared.beams else None,
                             "nbest": default.nbest if declared.nbest else None,
                             "length_penalty": default.length_norm.alpha if declared.beams else None}}


def directions(data: dict) -> dict[tuple[str, str], str | None]:
    """Each (source, target) language pair of a model's training corpora (their src_lang, tgt_lang)
    and the source tag that asks for it (None: untagged); a corpus without languages gives none."""
    corpora = [data.get("corpus"), *(data.get("corpora") or {}).values()]
    found: dict[tuple[str, str], str | None] = {}
    for corpus in corpora:
        if isinstance(corpus, dict) and corpus.get("src_lang") and corpus.get("tgt_lang"):
            found.setdefault((str(corpus["src_lang"]), str(corpus["tgt_lang"])), corpus.get("tag"))
    return found


def target_languages(data: dict) -> dict[str | None, str]:
    """Each source tag of a model's training corpora (None: untagged) and its target language, when
    the corpora have several target languages (tgt_lang); else none."""
    corpora = [data.get("corpus"), *(data.get("corpora") or {}).values()]
    found = {c.get("tag"): c["tgt_lang"] for c in corpora if isinstance(c, dict) and c.get("tgt_lang")}
    return found if len(set(found.values())) > 1 else {}
