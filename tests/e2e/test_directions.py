"""Several directions in one model (corpora tagged with their target language, `2de` and `2en`):
each test set is scored for off-target outputs, the share a language identifier places in the
run's other target language (`test/off_target`, `test/NAME/off_target`), each its own tokenized
BLEU (`test/NAME/bleu_tok_lc`), and task=evaluate gives the same figures; a run with one target
language has no off-target metric."""

import itertools
import json
import logging
import re
from pathlib import Path

import pytest

from tests.helpers import compose_config
from transformer_mt.evaluation.metrics import tokenized_lowercased_bleu
from transformer_mt.evaluation.off_target import off_target_rate
from transformer_mt.tasks import run

pytestmark = pytest.mark.slow
ENGLISH = {"the man": "der Mann", "the woman": "die Frau", "the child": "das Kind", "the dog": "der Hund",
           "the teacher": "der Lehrer"}
VERBS = {"sees": "sieht", "finds": "findet", "is looking for": "sucht", "likes": "mag"}
OBJECTS = {"a small house": "ein kleines Haus", "a red car": "ein rotes Auto", "the old tree": "den alten Baum",
           "a new book": "ein neues Buch", "the green garden": "den grünen Garten"}


def write_corpus(folder: Path) -> None:
    """English-German pairs from templates (100 of them: 80 train, 10 val, 10 test), as {split}.{en,de}."""
    pairs = [(f"{s} {v} {o} .", f"{ENGLISH[s]} {VERBS[v]} {OBJECTS[o]} .".capitalize())
             for s, v, o in itertools.product(ENGLISH, VERBS, OBJECTS)]
    folder.mkdir(parents=True)
    for split, rows in (("train", pairs[::10] + [p for i, p in enumerate(pairs) if i % 10 > 1]),
                        ("val", pairs[1::10]), ("test", pairs[1::10])):
        for side, lang in enumerate(("en", "de")):
            (folder / f"{split}.{lang}").write_text("".join(pair[side] + "\n" for pair in rows))


def directions(data: Path) -> list[str]:
    corpus = f"{{_target_: transformer_mt.data.TextFileCorpus, data_dir: {data}, src_lang: de, tgt_lang: en, tag: 2en}}"
    return ["data=files", f"data.corpora.files.data_dir={data}", "data.corpora.files.src_lang=en",
            "data.corpora.files.tgt_lang=de", "data.corpora.files.tag=2de", f"+data.corpora.de_en={corpus}",
            "data.tokenizer.vocab_size=200",
            "trainer.max_epochs=2", "data.max_tokens=256", "task.tokenized_bleu=true"]


def test_off_target_rate_is_the_share_of_lines_identified_as_another_target_language():
    german = ["Ein Mann fährt mit dem Fahrrad über die Brücke.", "Zwei Hunde spielen im Schnee.",
              "Eine Frau liest ein Buch im Park.", "Die Kinder essen Eis am Strand."]
    english = ["A man rides his bike across the bridge.", "Two dogs are playing in the snow.",
               "A woman is reading a book in the park.", "The children eat ice cream on the beach."]
    assert off_target_rate(german, "de", ("de", "en")) == 0.0
    assert off_target_rate(english, "de", ("de", "en")) == 100.0
    assert off_target_rate([*german[:3], english[0]], "de", ("de", "en")) == 25.0
    assert off_target_rate([german[0], "", english[1], english[2]], "en", ("de", "en")) == 25.0  # "": no language
    with pytest.raises(ValueError, match="'fr' is not among the languages"):
        off_target_rate(german, "fr", ("de", "en"))


def test_each_direction_is_scored_for_off_target_outputs_and_evaluate_gives_the_same(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="transformer_mt")
    write_corpus(tmp_path / "data")
    cache = tmp_path / "cache"
    run(compose_config(tmp_path / "both", directions(tmp_path / "data"), cache_dir=cache))
    metrics = json.loads((tmp_path / "both" / "metrics.json").read_text())
    for prefix, files, language in (("test", metrics, "de"), ("test/de_en", metrics["sets"]["de_en"], "en")):
        lines, references = (Path(files[f]).read_text().splitlines() for f in ("translations", "references"))
        assert len(lines) == 10 and metrics[f"{prefix}/off_target"] == off_target_rate(lines, language, ("de", "en"))
        assert metrics[f"{prefix}/bleu_tok_lc"] == tokenized_lowercased_bleu(lines, references)["bleu_tok_lc"], prefix
    assert {"val/off_target", "val/de_en/off_target"} <= set(metrics)
    log = caplog.text
    assert re.search(r"test: BLEU [\d.]+ .* off-target \d+\.\d%", log), log[-2000:]
    assert re.search(r"test/de_en: BLEU [\d.]+ .* off-target \d+\.\d%", log), log[-2000:]
    run(compose_config(tmp_path / "eval", ["task=evaluate", f"ckpt_path={metrics['tested_checkpoint']}",
                                           "task.tokenized_bleu=true"], cache_dir=cache))
    evaluated = json.loads((tmp_path / "eval" / "metrics.json").read_text())
    keys = ("test/off_target", "test/de_en/off_target", "test/bleu_tok_lc", "test/de_en/bleu_tok_lc")
    assert [evaluated[k] for k in keys] == [metrics[k] for k in keys]
    one = [o for o in directions(tmp_path / "data") if "de_en" not in o and "2de" not in o]
    run(compose_config(tmp_path / "one", [*one, "trainer.max_epochs=1"], cache_dir=cache))
    assert not [k for k in json.loads((tmp_path / "one" / "metrics.json").read_text()) if "off_target" in k]
