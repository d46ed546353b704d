"""experiments/multi30k/ship.py, run as a process: a distilled student's averaged checkpoint, which
records its corpora, tokenizer file and run folders by this machine's paths, is shipped with none of
them, and task=evaluate scores the shipped file from its recorded data under another DATA_DIR with
the same translations as the unshipped one."""

import json
import os
import re
import subprocess
from pathlib import Path

import torch

from tests.helpers import ROOT, python, run_py

SHIPPED = ROOT / "experiments" / "multi30k" / "multi30k_en_de.ckpt"
SOURCES = ["A man is riding a bicycle down the street.", "Two dogs are playing in the snow.",
           "A little girl is eating an apple."]
REFERENCES = ["Ein Mann fährt mit dem Fahrrad die Straße hinunter.", "Zwei Hunde spielen im Schnee.",
              "Ein kleines Mädchen isst einen Apfel."]


def student(tmp_path: Path) -> Path:
    """The shipped weights with the data record a task=distill student under tmp_path/runs writes."""
    checkpoint = torch.load(SHIPPED, map_location="cpu", weights_only=True)
    runs = tmp_path / "runs"
    synthetic = runs / "distill" / "distilled" / "synthetic"
    config = checkpoint["hyper_parameters"]["data"]["config"]
    config["corpora"] = {"distilled": {"_target_": "transformer_mt.data.TextFileCorpus", "data_dir": str(synthetic),
                                       "src_lang": "en", "tgt_lang": "de", "splits": {"train": "train"},
                                       "weight": 1.0, "tag": None}}
    config["tokenizer"]["file"] = str(synthetic / "vocabulary" / "src.json")
    config["corpus"]["data_dir"] = str(tmp_path / "machine" / "multi30k")
    config["run_dir"] = str(runs / "distill" / "distilled" / "student")
    config["cache_dir"] = str(tmp_path / "cache")
    checkpoint["averaged_from"] = [str(runs / "distill" / "distilled" / "student" / "checkpoints" / "epoch=9.ckpt")]
    path = tmp_path / "average.ckpt"
    torch.save(checkpoint, path)
    return path


def strings(value) -> list[str]:
    if isinstance(value, dict):
        return [s for v in value.values() for s in strings(v)]
    if isinstance(value, list | tuple):
        return [s for v in value for s in strings(v)]
    return [value] if isinstance(value, str) else []


def ship(*args) -> subprocess.CompletedProcess:
    """`python experiments/multi30k/ship.py ARGS` (forked from this worker's warm server where it can be)."""
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    return subprocess.run([python(env), "experiments/multi30k/ship.py", *map(str, args)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


def test_a_students_paths_are_refused_without_outputs_and_none_is_left_with_it(tmp_path):
    average, out = student(tmp_path), tmp_path / "shipped.ckpt"
    refused = ship(average, out)
    assert refused.returncode == 1
    assert re.match(r"error: data\.corpora\.distilled\.data_dir=.* give --outputs", refused.stderr.splitlines()[-1])
    assert not out.exists()
    shipped = ship(average, out, "--outputs", tmp_path / "runs")
    assert shipped.returncode == 0, shipped.stderr[-2000:]
    shipped = torch.load(out, map_location="cpu", weights_only=True)
    left = [s for s in strings(shipped["hyper_parameters"]) + shipped["averaged_from"] if str(tmp_path) in s]
    assert left == []
    config = shipped["hyper_parameters"]["data"]["config"]
    assert config["corpora"]["distilled"]["data_dir"] == "outputs/distill/distilled/synthetic"
    assert config["corpora"]["main"]["data_dir"] == "${oc.env:DATA_DIR,data}/multi30k" and "corpus" not in config
    assert config["tokenizer"]["file"] is None and shipped["averaged_from"] == ["epoch=9.ckpt"]
    weights = torch.load(average, map_location="cpu", weights_only=True)["state_dict"]
    assert all(torch.equal(shipped["state_dict"][k], v) for k, v in weights.items())


def test_the_shipped_student_evaluates_on_another_machines_data_as_before(tmp_path, monkeypatch):
    out = tmp_path / "shipped.ckpt"
    shipped = ship(student(tmp_path), out, "--outputs", tmp_path / "runs")
    assert shipped.returncode == 0, shipped.stderr[-2000:]
    corpus = tmp_path / "data" / "multi30k"
    corpus.mkdir(parents=True)
    (corpus / "test2016.en").write_text("".join(s + "\n" for s in SOURCES), encoding="utf-8")
    (corpus / "test2016.de").write_text("".join(s + "\n" for s in REFERENCES), encoding="utf-8")
    monkeypatch.setenv("DATA_DIR", str(tmp_path / "data"))
    translations = []
    for name, ckpt in (("shipped", out), ("original", SHIPPED)):
        result = run_py("task=evaluate", f"ckpt_path={ckpt}", f"hydra.run.dir={tmp_path}/{name}",
                        f"paths.cache_dir={tmp_path}/cache_{name}")
        assert result.returncode == 0, result.stderr[-2000:]
        metrics = json.loads((tmp_path / name / "metrics.json").read_text())
        assert metrics["test/bleu"] > 20
        translations.append((tmp_path / name / "test.translations.txt").read_text(encoding="utf-8"))
    assert translations[0] == translations[1]
