"""A toy run with logger=many, read back the way a researcher would see it: TensorBoard's event
files, the offline wandb run (media files and its transaction log), and plots/ in the run directory."""

import json
import math
from pathlib import Path

import pytest
import yaml
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from tests.helpers import FAST, compose_config
from tests.wandb_records import records, run_record, summary
from transformer_mt.tasks import run

PNG = b"\x89PNG\r\n\x1a\n"
RUN = ["logger=many", "trainer.max_epochs=2", "trainer.log_every_n_steps=2", "data.corpora.toy.num_train=300",
       "data.corpora.toy.num_val=12", "data.corpora.toy.num_test=7", "callbacks.step_meter.peak_flops=1e12",
       "callbacks.dashboard.upload_best_checkpoint=true", "tags=[dashboard,toy]"]


@pytest.fixture(scope="module")
def many(tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("many")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("WANDB_MODE", "offline")
        mp.setenv("WANDB_DIR", str(out))
        mp.setenv("WANDB_CACHE_DIR", str(out / "wandb-cache"))
        mp.setenv("WANDB_DATA_DIR", str(out / "wandb-data"))
        metrics = run(compose_config(out, RUN))
    return out, metrics


def events(folder: Path) -> list[EventAccumulator]:
    accumulators = []
    for path in sorted(folder.glob("events.out.tfevents.*")):
        acc = EventAccumulator(str(path), size_guidance={"scalars": 0, "images": 0, "tensors": 0})
        acc.Reload()
        accumulators.append(acc)
    return accumulators


def texts(acc: EventAccumulator, tag: str) -> list[str]:
    return [e.tensor_proto.string_val[0].decode() for e in acc.Tensors(tag)]


def test_tensorboard_has_health_scalars_attention_images_and_translation_text(many):
    out, metrics = many
    accs = events(out / "tensorboard")
    scalars = {tag: [e.value for e in acc.Scalars(tag)] for acc in accs for tag in acc.Tags()["scalars"]}
    assert {"train/loss", "train/nll", "train/ppl", "train/lr", "train/tokens_per_sec", "train/grad_norm",
            "train/padding", "train/tflops", "train/mfu", "val/loss", "val/bleu", "val/chrf", "test/bleu",
            "test/chrf", "test/loss"} <= set(scalars)
    assert all(0 < v <= 1 for v in scalars["train/mfu"])
    # the same timing and FLOPs give both: MFU = achieved FLOP/s / the peak given (1e12 FLOP/s = 1 TFLOP/s)
    assert scalars["train/mfu"] == pytest.approx(scalars["train/tflops"])
    assert all(0 <= v < 1 for v in scalars["train/padding"]) and all(v > 0 for v in scalars["train/grad_norm"])
    assert scalars["test/bleu"] == [pytest.approx(metrics["test/bleu"])]
    images = [tag for acc in accs for tag in acc.Tags()["images"]]
    assert sorted(images) == ["val/attention/sentence0", "val/attention/sentence1"]
    assert all(len(acc.Images(tag)) == 2 for acc in accs for tag in acc.Tags()["images"])  # one per validation
    tables = [t for acc in accs if "val/translations/text_summary" in acc.Tags()["tensors"]
              for t in texts(acc, "val/translations/text_summary")]
    assert len(tables) == 2 and tables[0].count("\n| ") == 8  # 8 sentences (header and rule not counted)
    first_ids = [row.split(" | ")[0] for row in tables[0].splitlines()[2:]]
    assert first_ids == [f"| {i}" for i in range(8)]  # the first 8 of the split, every time
    assert [r.split(" | ")[1] for r in tables[0].splitlines()[2:]] == [r.split(" | ")[1] for r in
                                                                       tables[1].splitlines()[2:]]
    summary_text = [t for acc in accs if "test/summary/text_summary" in acc.Tags()["tensors"]
                    for t in texts(acc, "test/summary/text_summary")]
    assert metrics["bleu_signature"] in summary_text[0]
    hparams = yaml.safe_load((out / "tensorboard" / "hparams.yaml").read_text())
    assert hparams["num_parameters"] == metrics["num_parameters"] and hparams["run_dir"] == str(out)
    assert hparams["model"]["d_model"] == 64 and hparams["tags"] == ["dashboard", "toy"]


def test_wandb_offline_run_has_tables_images_summary_config_and_the_best_checkpoint(many):
    out, metrics = many
    (run_dir,) = (out / "wandb").glob("offline-run-*")
    media = run_dir / "files" / "media"
    val_tables = sorted((media / "table" / "val").glob("translations_*.table.json"))
    assert len(val_tables) == 2
    for path in val_tables:
        table = json.loads(path.read_text())
        assert table["columns"] == ["id", "source", "reference", "hypothesis", "sentence BLEU"]
        assert [row[0] for row in table["data"]] == list(range(8))
        assert all(0 <= row[4] <= 100 for row in table["data"])
    (test_table,) = (media / "table" / "test").glob("translations_*.table.json")
    hyps = (out / "test.translations.txt").read_text().splitlines()
    assert [row[3] for row in json.loads(test_table.read_text())["data"]] == hyps
    images = sorted(p.name.split("_")[0] for p in (media / "images" / "val" / "attention").glob("*.png"))
    assert images == ["sentence0"] * 2 + ["sentence1"] * 2 and all(
        p.read_bytes()[:8] == PNG for p in (media / "images").rglob("*.png"))

    log = next(run_dir.glob("run-*.wandb"))
    values = summary(log)
    assert json.loads(values["test/bleu"]) == pytest.approx(metrics["test/bleu"])
    assert json.loads(values["test/chrf"]) == pytest.approx(metrics["test/chrf"])
    assert json.loads(values["test/bleu_signature"]) == metrics["bleu_signature"]
    assert math.isfinite(json.loads(values["train/grad_norm"]))
    record = run_record(log)
    assert list(record.tags) == ["dashboard", "toy"]
    assert record.display_name == ",".join(sorted(RUN))  # Hydra's job.override_dirname
    config = {item.key: item.value_json for r in records(log) if r.WhichOneof("record_type") == "config"
              for item in r.config.update}
    assert json.loads(config["num_parameters"]) == metrics["num_parameters"]
    assert json.loads(config["run_dir"]) == str(out) and json.loads(config["model"])["d_model"] == 64
    models = [r.artifact for r in records(log) if r.WhichOneof("record_type") == "artifact"
              and r.artifact.type == "model"]
    assert len(models) == 1 and models[0].name.startswith("model-")
    assert [f.path for f in models[0].manifest.contents] == ["best.ckpt"]


def test_run_directory_has_curves_and_the_last_validations_heatmaps(many):
    out, metrics = many
    curves = (out / "plots" / "curves.csv").read_text().splitlines()
    points = [line.split(",") for line in curves[1:]]
    val_steps = [int(s) for s, key, _ in points if key == "val/bleu"]
    assert len(val_steps) == 2 and val_steps[-1] == metrics["steps"]
    assert [float(v) for s, key, v in points if key == "val/bleu"][-1] == pytest.approx(metrics["val/bleu"])
    assert len([1 for _, key, _ in points if key == "train/loss"]) >= metrics["steps"] // 2
    assert (out / "plots" / "curves.png").read_bytes()[:8] == PNG
    heatmaps = sorted(p.name for p in (out / "plots" / "attention").iterdir())
    assert heatmaps == ["sentence0.png", "sentence1.png"]


def test_csv_logger_gets_the_config_too(many):
    out, metrics = many
    hparams = yaml.safe_load((out / "csv" / "hparams.yaml").read_text())
    assert hparams["num_parameters"] == metrics["num_parameters"]
    assert hparams["data"]["corpora"]["toy"]["num_train"] == 300


def test_dashboard_and_curves_can_be_switched_off(tmp_path):
    run(compose_config(tmp_path / "on", FAST))
    assert sorted(p.name for p in (tmp_path / "on" / "plots").iterdir()) == ["attention", "curves.csv", "curves.png"]
    run(compose_config(tmp_path / "off", [*FAST, "~callbacks.dashboard", "~callbacks.learning_curves"]))
    assert not (tmp_path / "off" / "plots").exists()
