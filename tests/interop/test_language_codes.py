"""Language codes as tags, over a whole fine-tuning run from a tiny random M2M-100 folder: a corpus's
`tag` puts the source code before every source and its `target_tag` the target code before every
target; validation and test force that code as the first output token (counted 0, as generate's
forced_bos_token_id); task=translate, task=score and a server name both codes as
task.source_lang / task.target_lang (a request's source_lang / target_lang) and give what the run's
test gave; a code the model lacks is one line naming the key."""

import csv
import json

import datasets
import httpx
import pytest
import torch

from tests.e2e.test_serve import Server
from tests.helpers import compose_config, run_py
from transformer_mt.data.cache_entry import ARROW
from transformer_mt.data.toy import ToyCorpus
from transformer_mt.tasks import run

pytest.importorskip("transformers")

SIZES = {"num_train": 300, "num_val": 10, "num_test": 10}
CODES = ["task.source_lang=__en__", "task.target_lang=__de__"]


@pytest.fixture(scope="module")
def fine_tuned(m2m100_folder, tmp_path_factory):
    """A two-epoch fine-tuning of the tiny M2M-100 on the toy corpus tagged __en__ -> __de__."""
    folder = tmp_path_factory.mktemp("codes")
    data = [f"data.corpora.toy.{k}={v}" for k, v in SIZES.items()]
    data += ["data.corpora.toy.tag=__en__", "data.corpora.toy.target_tag=__de__"]
    run(compose_config(folder / "train", [f"model.init_from={m2m100_folder}", "trainer.max_epochs=2", *data]))
    return folder


def test_every_target_starts_with_the_code_the_val_loss_falls_and_evaluate_agrees(fine_tuned, m2m100_folder):
    from transformer_mt.interop.m2m100 import read_m2m100

    vocabularies = read_m2m100(m2m100_folder)[2]
    english, german = (vocabularies.src.token_id(code) for code in ("__en__", "__de__"))
    entries = sorted((fine_tuned / "train" / ".cache").glob("ids-*"))
    assert len(entries) == 3  # train, val, test
    for entry in entries:
        table = datasets.Dataset.from_file(str(entry / ARROW))
        assert {ids[0] for ids in table["src_ids"]} == {english} and {ids[0] for ids in table["tgt_ids"]} == {german}
    with open(fine_tuned / "train" / "csv" / "metrics.csv", newline="") as rows:
        losses = [float(row["val/loss"]) for row in csv.DictReader(rows) if row["val/loss"]]
    assert len(losses) == 2 and losses[1] < losses[0]
    best = fine_tuned / "train" / "checkpoints" / "best.ckpt"
    assert torch.load(best, weights_only=True)["hyper_parameters"]["model"]["positional"] == "fairseq"
    tested = json.loads((fine_tuned / "train" / "metrics.json").read_text())
    again = run(compose_config(fine_tuned / "evaluate", ["task=evaluate", f"ckpt_path={best}"]))
    assert again["test/loss"] == pytest.approx(tested["test/loss"], abs=1e-6) and again["test/bleu"] == \
        tested["test/bleu"]  # the checkpoint's own data: its codes, forced as the run's test forced them


def test_translate_with_both_codes_writes_what_the_runs_test_wrote(fine_tuned, tmp_path):
    """The run's test decoded with the target code forced; task=translate naming both codes decodes
    the test sources to the same lines, and task=score of those pairs the log-probability of each
    target after the code (which it does not count) by hand."""
    best = fine_tuned / "train" / "checkpoints" / "best.ckpt"
    sources = ToyCorpus(**SIZES).load("test").src
    (tmp_path / "in.txt").write_text("".join(f"{line}\n" for line in sources))
    result = run_py("task=translate", f"ckpt_path={best}", f"task.input={tmp_path}/in.txt", *CODES,
                    "task.scores=true", f"hydra.run.dir={tmp_path}/translate")
    assert result.returncode == 0, result.stderr[-2000:]
    rows = [line.split("\t") for line in result.stdout.splitlines()]
    written = (fine_tuned / "train" / "test.translations.txt").read_text().splitlines()
    assert [text for _, _, text in rows] == written and len(written) == len(sources)
    (tmp_path / "pairs.tsv").write_text("".join(f"{s}\t{text}\n" for s, (_, _, text) in zip(sources, rows)))
    scored = run_py("task=score", f"ckpt_path={best}", f"task.input={tmp_path}/pairs.tsv", *CODES,
                    f"hydra.run.dir={tmp_path}/score")
    assert scored.returncode == 0, scored.stderr[-2000:]
    assert [float(line.split("\t")[0]) for line in scored.stdout.splitlines()] == pytest.approx(
        teacher_forced(best, sources, [text for _, _, text in rows]), abs=1e-4)


def teacher_forced(checkpoint, sources: list[str], targets: list[str]) -> list[float]:
    """By hand: each target's log-probability after __en__ SOURCE </s> and </s> __de__ (the code
    given, not counted), its EOS included."""
    from transformer_mt.inference.members import load_translator

    translator = load_translator([checkpoint], None)
    vocab = translator.tokenizer
    english, german = vocab.src.token_id("__en__"), vocab.tgt.token_id("__de__")
    out = []
    for source, ids in zip(sources, vocab.tgt.encode(targets)):
        src = torch.tensor(vocab.encode_sources([source], [english]))
        tgt = [german, *ids, translator.eos_id]
        lprobs = translator.log_probs(src, torch.tensor([[translator.bos_id, *tgt[:-1]]]))[0]
        out.append(sum(lprobs[i, token].item() for i, token in enumerate(tgt) if i > 0))
    return out


@pytest.mark.parametrize(("key", "value", "start"), [
    ("task.target_lang", "__xx__", "task.target_lang=__xx__: the vocabulary has no token <__xx__>"),
    ("task.tag", "__en__", "task.tag=__en__ and task.source_lang=__en__ both name the token"),
])
def test_a_code_the_model_lacks_or_two_source_tokens_are_one_line(fine_tuned, tmp_path, key, value, start):
    best = fine_tuned / "train" / "checkpoints" / "best.ckpt"
    (tmp_path / "in.txt").write_text("a line\n")
    result = run_py("task=translate", f"ckpt_path={best}", f"task.input={tmp_path}/in.txt",
                    "task.source_lang=__en__", f"{key}={value}", f"hydra.run.dir={tmp_path}/run")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert start in result.stderr


def test_a_server_lists_the_codes_and_takes_them_per_request(fine_tuned, tmp_path):
    """GET /models lists the model's language codes; a request naming source_lang and target_lang
    gets the run's test translations, one that leaves them out the server's defaults
    (task.source_lang / task.target_lang), and the LibreTranslate mount's en -> de the same (its
    codes route it); an unknown code or two source tokens: a 422 naming the
    field, and the server serves on."""
    best = fine_tuned / "train" / "checkpoints" / "best.ckpt"
    sources = ToyCorpus(**SIZES).load("test").src
    written = (fine_tuned / "train" / "test.translations.txt").read_text().splitlines()
    server = Server(tmp_path / "serve", f"ckpt_path={best}", *CODES)
    try:
        model = httpx.get(f"{server.url}/models", timeout=30).json()["models"][0]
        assert {"__en__", "__de__", "__fr__"} <= set(model["language_codes"])
        assert model["default_target_lang"] == "__de__"
        named = server.post({"text": sources, "source_lang": "__en__", "target_lang": "__de__"})
        assert [t["text"] for t in named.json()["translations"]] == written
        assert [t["text"] for t in server.post({"text": sources}).json()["translations"]] == written
        libre = httpx.post(f"{server.url}/libretranslate/translate", timeout=60,
                           json={"q": sources[0], "source": "en", "target": "de"})  # routed by the codes
        assert libre.status_code == 200 and libre.json()["translatedText"] == written[0]
        for body, field in (({"text": "a", "target_lang": "__xx__"}, "target_lang"),
                            ({"text": "a", "tag": "__en__", "source_lang": "__en__"}, "source_lang")):
            refused = server.post(body)
            assert refused.status_code == 422 and refused.json()["field"] == field
        assert server.post({"text": sources[:1]}).status_code == 200
    finally:
        server.stop()


def test_a_hub_folder_is_a_ckpt_path_for_translate_evaluate_and_serve(m2m100_folder, tmp_path):
    """ckpt_path=DIR decodes an M2M-100 folder as it is: task=translate's greedy lines with both
    codes are generate's with forced_bos_token_id (their text without the language codes, which the
    hub's tokenizer drops as special tokens); task=evaluate scores it on data tagged with its codes,
    its test outputs task=translate's with the same codes; without a data preset it says the folder
    records none; a server on it answers as task=translate."""
    import re

    transformers = pytest.importorskip("transformers")
    lines = ["A man rides a bicycle down the street.", "Ein Mann fährt mit dem Fahrrad.", "Zahlen: 1234"]
    (tmp_path / "in.txt").write_text("".join(f"{line}\n" for line in lines))
    greedy = ["decoding=greedy", "decoding.options.max_len_a=0", "decoding.options.max_len_b=20"]
    result = run_py("task=translate", f"ckpt_path={m2m100_folder}", f"task.input={tmp_path}/in.txt", *CODES, *greedy,
                    f"hydra.run.dir={tmp_path}/translate")
    assert result.returncode == 0, result.stderr[-2000:]
    model = transformers.M2M100ForConditionalGeneration.from_pretrained(m2m100_folder).eval()
    tokenizer = transformers.M2M100Tokenizer.from_pretrained(m2m100_folder, src_lang="en")
    with torch.no_grad():
        generated = model.generate(**tokenizer(lines, return_tensors="pt", padding=True), num_beams=1,
                                   forced_bos_token_id=tokenizer.get_lang_id("de"), do_sample=False,
                                   max_new_tokens=20)
    theirs = [re.sub(r"__[a-z]+__", "", text) for text in tokenizer.batch_decode(generated, skip_special_tokens=True)]
    assert result.stdout.splitlines() == theirs and all(theirs)
    data = ["data=toy", "data.corpora.toy.num_test=10", "data.corpora.toy.tag=__en__",
            "data.corpora.toy.target_tag=__de__"]
    evaluated = run_py("task=evaluate", f"ckpt_path={m2m100_folder}", *data, *greedy,
                       f"hydra.run.dir={tmp_path}/evaluate")
    assert evaluated.returncode == 0, evaluated.stderr[-2000:]
    metrics = json.loads((tmp_path / "evaluate" / "metrics.json").read_text())
    assert 0 < metrics["test/loss"] < 20
    (tmp_path / "test.txt").write_text("".join(f"{line}\n" for line in ToyCorpus(num_test=10).load("test").src))
    again = run_py("task=translate", f"ckpt_path={m2m100_folder}", f"task.input={tmp_path}/test.txt", *CODES, *greedy,
                   f"hydra.run.dir={tmp_path}/again")
    assert again.stdout.splitlines() == (tmp_path / "evaluate" / "test.translations.txt").read_text().splitlines()
    server = Server(tmp_path / "serve", f"ckpt_path={m2m100_folder}", *CODES, *greedy)
    try:
        assert [t["text"] for t in server.post({"text": lines}).json()["translations"]] == theirs
    finally:
        server.stop()
    refused = run_py("task=evaluate", f"ckpt_path={m2m100_folder}", f"hydra.run.dir={tmp_path}/none")
    assert refused.returncode == 1 and f"ckpt_path={m2m100_folder} records no data config" in refused.stderr


def test_a_new_language_code_is_a_new_row_at_the_mean_of_the_codes_and_trains(m2m100_folder, tmp_path):
    """model.new_tokens=[kas_Deva] on an M2M-100 folder: the vocabulary gains the token after its
    rows (a tag: dropped when decoding), every embedding matrix a row equal to the mean of its
    language codes' rows; a run whose corpus targets it trains (val loss falls) and translates into
    it, and exports with the code at its id. A token the vocabulary has, or new tokens without
    init_from: one line naming the key."""
    from transformer_mt.errors import ConfigError
    from transformer_mt.interop.m2m100 import read_m2m100
    from transformer_mt.tasks.runs.new_tokens import with_new_tokens

    architecture, weights, vocabularies = read_m2m100(m2m100_folder)
    grown, rows = with_new_tokens(vocabularies, weights, ["kas_Deva"])
    size = vocabularies.src.vocab_size
    assert grown.src.vocab_size == size + 1 and grown.src.token_id("kas_Deva") == size
    assert grown.target_prefix("kas_Deva", "task.target_lang") == [size] and grown.tgt.decode([[size, 5]]) == \
        vocabularies.tgt.decode([[5]])
    codes = [vocabularies.src.token_id(code) for code in vocabularies.src.tag_tokens() if code.startswith("__")]
    assert len(codes) == 100  # M2M-100's codes, not the 8 rows no token has (<unusedN>)
    for name in ("src_embed.weight", "tgt_embed.weight", "output_proj.weight"):
        assert rows[name].shape[0] == size + 1 and torch.equal(rows[name][:size], weights[name])
        assert torch.allclose(rows[name][size], weights[name][codes].mean(dim=0), atol=1e-7)
    with pytest.raises(ConfigError, match="model.new_tokens: __de__ is in the vocabulary already"):
        with_new_tokens(vocabularies, weights, ["__de__"])
    data = [f"data.corpora.toy.{k}={v}" for k, v in SIZES.items()]
    run(compose_config(tmp_path / "train", [f"model.init_from={m2m100_folder}", "model.new_tokens=[kas_Deva]",
                                            "trainer.max_epochs=2", *data, "data.corpora.toy.tag=__en__",
                                            "data.corpora.toy.target_tag=kas_Deva"]))
    with open(tmp_path / "train" / "csv" / "metrics.csv", newline="") as table:
        losses = [float(row["val/loss"]) for row in csv.DictReader(table) if row["val/loss"]]
    assert len(losses) == 2 and losses[1] < losses[0]
    (tmp_path / "in.txt").write_text("every red city hears the happy sailor\n")
    best = tmp_path / "train" / "checkpoints" / "best.ckpt"
    result = run_py("task=translate", f"ckpt_path={best}", f"task.input={tmp_path}/in.txt",
                    "task.source_lang=__en__", "task.target_lang=kas_Deva", f"hydra.run.dir={tmp_path}/translate")
    assert result.returncode == 0 and len(result.stdout.splitlines()) == 1, result.stderr[-2000:]
    exported = run_py("task=export", f"ckpt_path={best}", "task.format=hf", f"task.output={tmp_path}/hf",
                      f"hydra.run.dir={tmp_path}/export")
    assert exported.returncode == 0, exported.stderr[-2000:]
    tokenizer = pytest.importorskip("transformers").AutoTokenizer.from_pretrained(tmp_path / "hf")
    assert tokenizer.convert_tokens_to_ids("kas_Deva") == size  # exported at our id, a special token
    alone = run_py("model.new_tokens=[kas_Deva]", "trainer.max_epochs=1", f"hydra.run.dir={tmp_path}/alone")
    assert alone.returncode == 1 and "model.new_tokens adds tokens to the vocabulary of an imported model" in \
        alone.stderr


def test_a_fine_tuned_model_exports_to_an_m2m100_folder_that_generates_as_ours(fine_tuned, tmp_path):
    """task=export task.format=hf of a fine-tuned M2M-100 (its corpus tagged __en__ -> __de__):
    M2M100ForConditionalGeneration and AutoTokenizer load the folder, and generate (greedy, the target
    code as forced_bos_token_id) writes task=translate's lines; task.format=ct2 and CTranslate2's
    greedy search too (fp32)."""
    transformers = pytest.importorskip("transformers")
    best = fine_tuned / "train" / "checkpoints" / "best.ckpt"
    greedy = ["decoding=greedy", "decoding.options.max_len_a=0", "decoding.options.max_len_b=30"]
    sources = ToyCorpus(**SIZES).load("test").src
    (tmp_path / "in.txt").write_text("".join(f"{line}\n" for line in sources))
    ours = run_py("task=translate", f"ckpt_path={best}", f"task.input={tmp_path}/in.txt", *CODES, *greedy,
                  f"hydra.run.dir={tmp_path}/translate")
    assert ours.returncode == 0, ours.stderr[-2000:]
    exported = run_py("task=export", f"ckpt_path={best}", "task.format=hf", f"task.output={tmp_path}/hf",
                      f"hydra.run.dir={tmp_path}/export")
    assert exported.returncode == 0, exported.stderr[-2000:]
    model = transformers.M2M100ForConditionalGeneration.from_pretrained(tmp_path / "hf").eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf", src_lang="en")
    with torch.no_grad():
        generated = model.generate(**tokenizer(sources, return_tensors="pt", padding=True), num_beams=1,
                                   do_sample=False, forced_bos_token_id=tokenizer.get_lang_id("de"),
                                   max_new_tokens=30)
    assert tokenizer.batch_decode(generated, skip_special_tokens=True) == ours.stdout.splitlines()
    ct2 = run_py("task=translate", f"ckpt_path={best}", f"task.input={tmp_path}/in.txt", *CODES, *greedy,
                 "task.engine=ctranslate2", f"task.ct2_dir={tmp_path}/ct2", f"hydra.run.dir={tmp_path}/ct2run")
    assert ct2.returncode == 0 and ct2.stdout == ours.stdout, ct2.stderr[-2000:]


def test_an_nllb_folder_exports_back_as_it_came(nllb_folder, tmp_path):
    """ckpt_path=an NLLB-200 folder, exported: its tokenizer's ids on the multilingual sample are
    NllbTokenizer's, and the model's logits the original's (fp32, 1e-5)."""
    from tests.interop.conftest import SAMPLE

    transformers = pytest.importorskip("transformers")
    exported = run_py("task=export", f"ckpt_path={nllb_folder}", "task.format=hf", f"task.output={tmp_path}/hf",
                      f"hydra.run.dir={tmp_path}/export")
    assert exported.returncode == 0, exported.stderr[-2000:]
    original = transformers.NllbTokenizer.from_pretrained(nllb_folder, src_lang="eng_Latn")
    again = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf", src_lang="eng_Latn")
    lines = [" ".join(line.split()) for line in SAMPLE]
    assert again(lines).input_ids == original(lines).input_ids
    batch = original(lines, return_tensors="pt", padding=True)
    target = torch.tensor([[2, original.convert_tokens_to_ids("deu_Latn"), 40, 41]] * len(lines))
    with torch.no_grad():
        theirs = transformers.M2M100ForConditionalGeneration.from_pretrained(nllb_folder).eval()(
            **batch, decoder_input_ids=target).logits
        back = transformers.M2M100ForConditionalGeneration.from_pretrained(tmp_path / "hf").eval()(
            **batch, decoder_input_ids=target).logits
    assert torch.allclose(back, theirs, atol=1e-5)
