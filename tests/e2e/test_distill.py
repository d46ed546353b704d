"""task=distill, sequence-level distillation in one command: the teacher's translations of the
training sources are written chunk by chunk (each one what task=translate gives), a student trains
on them and is compared with a baseline run by sacreBLEU's paired tests; stopped in any stage, the
same command goes on where it stopped and ends as the uninterrupted pipeline; a stage whose inputs
changed is redone with every stage after it."""

import json
import logging
import os
import shutil
from pathlib import Path

import pytest
import torch
from hydra.utils import instantiate

from tests.helpers import (
    SMALL_RUN,
    compose_config,
    interrupt_at,
    run_py,
    signal_at,
    stopped_in_the_third_chunk,
)
from transformer_mt.checkpoints.loading import read_checkpoint
from transformer_mt.errors import DataError
from transformer_mt.evaluation.significance import paired_test
from transformer_mt.run_folder import FolderLock
from transformer_mt.tasks import run
from transformer_mt.tasks.distill import check_teacher_data
from transformer_mt.tasks.pipelines.compose import training_shape
from transformer_mt.tasks.pipelines.stages import Stage, redo_changed

pytestmark = pytest.mark.slow
# the student learns the small run's data (300 training pairs, 7 test pairs): the small run is its
# teacher and its baseline; the teacher's beam is short, so that its (poor) translations end soon
DECODING = ["task.teacher_decoding.beam_size=2", "task.teacher_decoding.options.max_len_b=5"]
STUDENT = [*SMALL_RUN[1:], "trainer.max_epochs=2", "data.max_tokens=512", "~callbacks.epoch_checkpoint",
           "callbacks.last_checkpoint.every_n_steps=4"]


def distill(folder: Path, teacher: Path, cache: Path, *extra: str):
    return run_py("task=distill", f"task.teacher={teacher}", f"task.baseline={teacher}", "task.chunk_lines=100",
                  *DECODING, *STUDENT, *extra, f"hydra.run.dir={folder}", f"paths.cache_dir={cache}")


def weights(folder: Path) -> dict[str, torch.Tensor]:
    return torch.load(folder / "student" / "checkpoints" / "last.ckpt", map_location="cpu",
                      weights_only=True)["state_dict"]


@pytest.fixture(scope="module")
def distilled(small_run, tmp_path_factory):
    """The uninterrupted pipeline: its folder, the teacher's folder and the data cache."""
    root = tmp_path_factory.mktemp("distill")
    result = distill(root / "whole", small_run[0], root / "cache")
    assert result.returncode == 0, result.stderr[-3000:]
    return root / "whole", small_run[0], root / "cache"


def test_the_teachers_translations_train_the_student_which_is_compared_with_the_baseline(distilled, tmp_path):
    folder, teacher, cache = distilled
    for stage in ("synthetic", "student", "evaluation"):
        assert json.loads((folder / stage / "stage.json").read_text())["done"] is True
    sources = (folder / "synthetic" / "train.src").read_text().splitlines()
    assert len(sources) == 300 and len(list((folder / "synthetic" / "chunks").glob("*.out"))) == 3
    chunk = folder / "synthetic" / "chunks" / "00001"
    checkpoint = json.loads((teacher / "metrics.json").read_text())["tested_checkpoint"]
    result = run_py("task=translate", f"ckpt_path={checkpoint}", "decoding=beam", "decoding.beam_size=2",
                    "decoding.length_norm.alpha=1.0", "decoding.options.max_len_b=5", f"task.input={chunk}.in",
                    f"hydra.run.dir={tmp_path}/translate")
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout == Path(f"{chunk}.out").read_text()  # the teacher's translations, as task=translate gives
    config = (folder / "student" / "config.yaml").read_text()
    assert f"data_dir: {folder}/synthetic" in config and "weight: 0.0" in config  # originals: evaluated only
    # the teacher's vocabulary, not one trained on its translations: the student can take its place
    vocabulary = (teacher / "tokenizer" / "src.json").read_bytes()
    assert (folder / "student" / "tokenizer" / "src.json").read_bytes() == vocabulary
    metrics = json.loads((folder / "student" / "metrics.json").read_text())
    base = json.loads((teacher / "metrics.json").read_text())
    refs = Path(metrics["references"]).read_text().splitlines()
    expected = paired_test(Path(base["translations"]).read_text().splitlines(),
                           Path(metrics["translations"]).read_text().splitlines(), refs)
    comparison = json.loads((folder / "evaluation" / "comparison.json").read_text())
    assert (comparison["student_bleu"], comparison["baseline_bleu"], comparison["p_bootstrap"]) == \
        (expected.system, expected.baseline, expected.p_bootstrap)
    assert comparison["student_bleu"] == metrics["test/bleu"]
    assert "trained on other data" not in (folder / "run.log").read_text()  # the teacher's own training data


def test_stopped_after_a_chunk_or_mid_training_the_same_command_ends_as_the_uninterrupted_pipeline(distilled, tmp_path):
    folder, teacher, cache = distilled
    after_a_chunk = stopped_in_the_third_chunk(folder, tmp_path / "after_a_chunk", ["student", "evaluation"])
    result = distill(after_a_chunk, teacher, cache, "trainer.max_epochs=1")  # finished, on a smaller budget
    assert result.returncode == 0, result.stderr[-3000:]
    assert "synthetic corpus: 2 chunks were done already" in (after_a_chunk / "run.log").read_text()
    assert json.loads((after_a_chunk / "evaluation" / "stage.json").read_text())["done"] is True
    result = distill(after_a_chunk, teacher, cache)  # the budget raised: the student trains on from epoch 1
    assert result.returncode == 0, result.stderr[-3000:]
    log = (after_a_chunk / "run.log").read_text()
    assert "student: trained with {'max_steps': -1, 'max_epochs': 1, 'max_time': None}, now {'max_steps': -1, " \
        "'max_epochs': 2, 'max_time': None}: training on from its last checkpoint" in log
    assert "synthetic: done" in log and "student: resuming from" in log
    stopped = distill(tmp_path / "mid_training", teacher, cache, *interrupt_at(5, "SIGTERM"))
    assert stopped.returncode == 143, stopped.stderr[-3000:]
    last = stopped.stderr.strip().splitlines()[-1]  # the pipeline's command to go on with, not the stage's ckpt_path
    assert last.startswith("stopped by SIGTERM at step ") and "go on with the pipeline's command again: python " \
        f"run.py task=distill task.teacher={teacher}" in last and f"hydra.run.dir={tmp_path}/mid_training" in last
    assert last.endswith("(stage student resumes)") and "ckpt_path=" not in last
    resumed = distill(tmp_path / "mid_training", teacher, cache)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    log = (tmp_path / "mid_training" / "run.log").read_text()
    assert "synthetic: done" in log and "student: resuming from" in log
    whole = weights(folder)
    for other in (after_a_chunk, tmp_path / "mid_training"):
        assert (other / "synthetic" / "train.tgt").read_text() == (folder / "synthetic" / "train.tgt").read_text()
        assert all(torch.equal(whole[k], v) for k, v in weights(other).items()), other
        assert json.loads((other / "evaluation" / "comparison.json").read_text()) == \
            json.loads((folder / "evaluation" / "comparison.json").read_text())


@pytest.mark.parametrize("signal_name, status", [("SIGINT", 130), ("SIGTERM", 143)])
def test_a_stop_in_the_synthetic_stage_is_one_line_naming_the_stage_and_the_command(distilled, tmp_path,
                                                                                    signal_name, status):
    """Ctrl-C or SIGTERM while the teacher translates: one line (the stage, the chunks written, the
    pipeline's command), exit 130 / 143, no traceback; the chunks written are whole."""
    import shlex
    import signal
    import subprocess
    import time

    from tests.helpers import ROOT, python

    _, teacher, cache = distilled
    folder = tmp_path / "stopped"
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    command = [python(env), str(ROOT / "run.py"), "task=distill", f"task.teacher={teacher}", "task.chunk_lines=10",
               *DECODING, *STUDENT, f"paths.cache_dir={cache}", f"hydra.run.dir={folder}"]  # hydra.* last, as it says
    process = subprocess.Popen(command, cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while not list((folder / "synthetic" / "chunks").glob("*.out")) and time.monotonic() < deadline:
        time.sleep(0.05)
    process.send_signal(getattr(signal, signal_name))
    stderr = process.communicate(timeout=120)[1]
    assert process.returncode == status, stderr[-3000:]
    by = {"SIGINT": "Ctrl-C", "SIGTERM": "SIGTERM"}[signal_name]
    line = stderr.strip().splitlines()[-1]
    assert line.startswith(f"stopped by {by} in stage synthetic: ") and " chunks of 10 lines translated (" in line
    assert line.endswith(f"go on with the pipeline's command again: python run.py {shlex.join(command[2:])}")
    assert "Traceback" not in stderr
    for done in (folder / "synthetic" / "chunks").glob("*.out"):  # each chunk written is whole
        assert len(done.read_text().splitlines()) == 10
    assert not list((folder / "synthetic" / "chunks").glob(".*tmp"))


def without_student(finished: Path, copy: Path) -> Path:
    """A copy of a finished pipeline's folder with its synthetic stage done and nothing after it."""
    shutil.copytree(finished, copy)
    for stage in ("student", "evaluation"):
        shutil.rmtree(copy / stage)
    return copy


def go_on(teacher: Path) -> str:
    return f"go on with the pipeline's command again: python run.py task=distill task.teacher={teacher}"


def distill_stopped_on_its_output(folder: Path, teacher: Path, cache: Path, event: str, tmp_path: Path):
    """The pipeline sent SIGTERM when a line of its standard output contains `event`: its exit status
    and standard error."""
    import signal
    import subprocess

    from tests.helpers import ROOT, python

    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    command = [python(env), str(ROOT / "run.py"), "task=distill", f"task.teacher={teacher}", f"task.baseline={teacher}",
               "task.chunk_lines=100", *DECODING, *STUDENT, f"hydra.run.dir={folder}", f"paths.cache_dir={cache}"]
    with open(tmp_path / "stderr", "w+") as stderr:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=stderr, text=True)
        for line in process.stdout:
            if event in line:
                process.send_signal(signal.SIGTERM)
                break
        process.communicate(timeout=300)
        stderr.seek(0)
        return process.returncode, stderr.read()


def test_stops_in_and_after_the_students_run_name_the_steps_and_the_pipelines_command(distilled, tmp_path):
    """Ctrl-C as the student's run is built, then while it tests after training, then SIGTERM when
    its test table appears (its run writing its results, the pipeline between stages, or comparing:
    wherever it lands): each one line (the steps trained, the checkpoint) with the pipeline's command
    to go on with, exit 130 / 143, no traceback; that command then ends as the uninterrupted pipeline."""
    folder, teacher, cache = distilled
    copy = without_student(folder, tmp_path / "stopped")
    built = distill(copy, teacher, cache, *signal_at("built", "SIGINT"))
    assert built.returncode == 130, built.stderr[-3000:]
    last = built.stderr.strip().splitlines()[-1]
    assert last.startswith(f"stopped by Ctrl-C before training started; {go_on(teacher)}")
    assert last.endswith("(stage student resumes)") and "Traceback" not in built.stderr
    testing = distill(copy, teacher, cache, *signal_at("test_start", "SIGINT"))
    assert testing.returncode == 130, testing.stderr[-3000:]
    checkpoint = copy / "student" / "checkpoints" / "last.ckpt"
    steps = read_checkpoint(checkpoint)["global_step"]
    last = testing.stderr.strip().splitlines()[-1]
    assert last.startswith(f"stopped by Ctrl-C after training to step {steps}, before the test was done; "
                           f"{checkpoint} holds step {steps}; {go_on(teacher)}") and "Traceback" not in testing.stderr
    assert last.endswith("(stage student resumes)")
    status, err = distill_stopped_on_its_output(copy, teacher, cache, "test (test split)", tmp_path)
    assert status == 143, err[-3000:]
    last = err.strip().splitlines()[-1]
    assert last.startswith("stopped by SIGTERM ") and go_on(teacher) in last and "Traceback" not in err, err[-3000:]
    resumed = distill(copy, teacher, cache)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert json.loads((copy / "evaluation" / "comparison.json").read_text()) == \
        json.loads((folder / "evaluation" / "comparison.json").read_text())


def test_a_second_student_takes_the_first_ones_translations_as_they_are(distilled, tmp_path):
    """task.until=synthetic stops after the teacher's translations; task.translations=RUN copies that
    finished stage into another student's folder without translating: the same files and the same
    stage record as the uninterrupted pipeline's, so that its student (whose inputs are that stage's
    fingerprint) trains as that one did; a stage made with other inputs is refused in one line."""
    folder, teacher, cache = distilled
    first = distill(tmp_path / "first", teacher, cache, "task.until=synthetic")
    assert first.returncode == 0, first.stderr[-3000:]
    assert json.loads((tmp_path / "first" / "synthetic" / "stage.json").read_text())["done"] is True
    assert not (tmp_path / "first" / "student").exists()
    second = distill(tmp_path / "second", teacher, cache, f"task.translations={tmp_path}/first", "task.until=synthetic")
    assert second.returncode == 0, second.stderr[-3000:]
    log = (tmp_path / "second" / "run.log").read_text()
    assert f"synthetic: taken from {tmp_path}/first/synthetic" in log and "translates" not in log
    for name in ("train.src", "train.tgt", "stage.json"):
        assert (tmp_path / "second" / "synthetic" / name).read_bytes() == (folder / "synthetic" / name).read_bytes()
    other = distill(tmp_path / "third", teacher, cache, f"task.translations={tmp_path}/first",
                    "task.teacher_decoding.beam_size=3")
    assert other.returncode == 1 and other.stderr.strip().splitlines()[-1] == (
        f"error: task.translations={tmp_path}/first: its synthetic stage was made with other decoding.beam_size than "
        "this run's")


def test_the_teachers_translations_by_ctranslate2_equal_ours_and_are_a_stage_of_their_own(distilled, tmp_path):
    """task.engine=ctranslate2: the synthetic stage decoded by CTranslate2 (its teacher converted
    once beside the checkpoint), greedy (beam 1) as ours gives it, line for line; the engine is an
    input of the stage; an ensemble teacher is refused before any work."""
    pytest.importorskip("ctranslate2")
    folder, teacher, cache = distilled
    checkpoint = tmp_path / "teacher.ckpt"  # a copy: the conversion is written beside it
    shutil.copy(json.loads((teacher / "metrics.json").read_text())["tested_checkpoint"], checkpoint)

    def synthetic(name: str, *extra: str):
        return run_py("task=distill", "task.chunk_lines=100", *DECODING, "task.teacher_decoding.beam_size=1",
                      "task.until=synthetic", *STUDENT, *extra, f"hydra.run.dir={tmp_path}/{name}",
                      f"paths.cache_dir={cache}")

    ours, engine = synthetic("ours", f"task.teacher={checkpoint}"), synthetic(
        "engine", f"task.teacher={checkpoint}", "task.engine=ctranslate2")
    assert ours.returncode == 0 and engine.returncode == 0, engine.stderr[-3000:]
    assert (tmp_path / "engine" / "synthetic" / "train.tgt").read_text() == \
        (tmp_path / "ours" / "synthetic" / "train.tgt").read_text()
    assert json.loads((tmp_path / "engine" / "synthetic" / "stage.json").read_text())["inputs"]["engine"] == \
        "ctranslate2"
    assert "engine" not in json.loads((tmp_path / "ours" / "synthetic" / "stage.json").read_text())["inputs"]
    assert len(list((tmp_path / "ct2").iterdir())) == 1
    both = synthetic("both", f"task.teacher=[{checkpoint},{checkpoint}]", "task.engine=ctranslate2")
    assert both.returncode == 1 and both.stderr.strip().splitlines()[-1].startswith(
        "error: task.engine=ctranslate2 decodes one checkpoint")
    assert not (tmp_path / "both" / "synthetic").exists()


def test_a_stage_whose_inputs_changed_is_redone_with_every_stage_after_it(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="transformer_mt")
    stages = [Stage(name, tmp_path / name, {"teacher": "a", "beam": 5}) for name in ("synthetic", "student")]
    for stage in stages:
        stage.start()
        (stage.folder / "work").write_text("done")
        stage.finish()
    redo_changed(stages)  # nothing changed: the work stays
    assert all((s.folder / "work").is_file() and s.done() for s in stages) and not caplog.text
    changed = [Stage("synthetic", tmp_path / "synthetic", {"teacher": "a", "beam": 4}), stages[1]]
    redo_changed(changed)
    assert not (tmp_path / "synthetic").exists() and not (tmp_path / "student").exists()
    assert "synthetic: its inputs changed (beam): redoing it and every stage after it" in caplog.text
    nested = [Stage("student", tmp_path / "student", {"training": {"model": {"heads": 4, "d_model": 32}, "seed": 1}})]
    nested[0].start()
    redo_changed([Stage("student", tmp_path / "student", {"training": {"model": {"heads": 8, "d_model": 32},
                                                                        "seed": 1}})])
    assert "student: its inputs changed (training.model.heads): redoing it" in caplog.text  # which key, not "training"


def test_a_stage_trained_to_another_budget_trains_on_and_the_stages_after_it_are_redone(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="transformer_mt")
    inputs, budget = {"training": {"seed": 1}}, {"max_steps": 10, "max_epochs": None, "max_time": None}
    stages = [Stage("student", tmp_path / "student", inputs, budget), Stage("evaluation", tmp_path / "evaluation", {})]
    for stage in stages:
        stage.start()
        (stage.folder / "work").write_text("done")
        stage.finish()
    redo_changed(stages)
    assert all(s.done() for s in stages) and not caplog.text  # the same budget: nothing to do
    raised = [Stage("student", tmp_path / "student", inputs, {**budget, "max_steps": 20}), stages[1]]
    assert not raised[0].done() and raised[0].budget_changed() and not raised[0].changed()
    redo_changed(raised)
    assert (tmp_path / "student" / "work").is_file() and not (tmp_path / "evaluation").exists()  # trained on, redone
    assert "student: trained with {'max_steps': 10, 'max_epochs': None, 'max_time': None}, now {'max_steps': 20, " \
        in caplog.text and "training on from its last checkpoint and redoing every stage after it" in caplog.text


def test_what_a_stage_trains_is_its_input_and_how_it_runs_is_not(tmp_path):
    """A training stage's input is what the pipeline's config says it trains (its data, model,
    optimizer, seed, module); how it runs (DataLoader workers, encoding processes, module.compile,
    the trainer's budget, loggers, the test decoding) reaches its resume instead."""
    def shape(*overrides: str) -> dict:
        return training_shape(compose_config(tmp_path, ["task=distill", *overrides]))

    base = shape()
    for change in ("data.max_tokens=512", "model=base", "+data.corpora.x={a: 1}", "seed=3", "optim.optimizer.lr=2",
                   "module.label_smoothing=0.2", "tokens_per_update=2048"):
        assert shape(change) != base, change
    for change in ("data.num_workers=2", "data.num_proc=4", "module.compile=true", "trainer.max_steps=9", "logger=csv",
                   "decoding=beam", "progress=false"):
        assert shape(change) == base, change


def test_a_teacher_that_is_not_there_is_one_line(tmp_path):
    result = run_py("task=distill", f"task.teacher={tmp_path}/nothing.ckpt", f"hydra.run.dir={tmp_path}/run")
    assert result.returncode == 1 and result.stderr.strip().splitlines() == [
        f"error: task.teacher={tmp_path}/nothing.ckpt: no such checkpoint"]


def test_a_baseline_that_is_no_finished_run_is_refused_before_any_work(small_run, tmp_path):
    for baseline, why in ((tmp_path / "nowhere", "no such folder"),
                          (tmp_path, "a folder without metrics.json (not a finished training run)")):
        with pytest.raises(DataError) as err:
            run(compose_config(tmp_path / "run", ["task=distill", f"task.teacher={small_run[0]}",
                                                  f"task.baseline={baseline}"]))
        assert str(err.value) == f"task.baseline={baseline}: {why}"
        assert not (tmp_path / "run" / "synthetic").exists()


def test_a_teacher_trained_on_other_data_than_the_runs_corpus_is_said(small_run, tmp_path, caplog):
    """`data=` left off the command line: the teacher translates the default toy corpus's sources, as
    asked, after a warning naming both."""
    teacher = Path(json.loads((small_run[0] / "metrics.json").read_text())["tested_checkpoint"])
    data = compose_config(tmp_path, SMALL_RUN).data
    with caplog.at_level(logging.WARNING):
        check_teacher_data(teacher, instantiate(data.corpora.toy).fingerprint("train"), data)
    assert "trained on other data" not in caplog.text
    other = compose_config(tmp_path, ["data.corpora.toy.num_train=301"]).data
    with caplog.at_level(logging.WARNING):
        check_teacher_data(teacher, instantiate(other.corpora.toy).fingerprint("train"), other)
    assert f"task.teacher={teacher} was trained on other data (toy: ToyCorpus(" in caplog.text
    assert "num_train=300" in caplog.text and "translating the training sources of toy: ToyCorpus(" in caplog.text


def test_a_second_pipeline_into_a_folder_in_use_is_refused_in_one_line(tmp_path):
    lock = FolderLock(tmp_path / "run")
    assert lock.acquire()
    try:
        result = run_py("task=distill", f"task.teacher={tmp_path}/t.ckpt", f"hydra.run.dir={tmp_path}/run")
    finally:
        lock.release()
    assert result.returncode == 1 and result.stderr.startswith(f"error: {tmp_path}/run is the run folder of another "
                                                               "pipeline, still running (")
    assert len(result.stderr.strip().splitlines()) == 1
