"""Multiruns as a researcher runs them: an Optuna search that is killed and continued, the submitit
launchers, Hydra multirun with Lightning DDP, and task=report over a sweep with a failed job."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import lightning as L
import optuna
import pytest
from hydra.core.hydra_config import HydraConfig
from omegaconf import OmegaConf

from tests.helpers import compose_config, run_py
from transformer_mt.errors import TrainingDiverged
from transformer_mt.tasks import run

# jobs, folders, statuses, reports and one-line failures, no number the CPU computes: not run again
# under the portable profile
pytestmark = [pytest.mark.slow, pytest.mark.cli]
TINY = ["data.corpora.toy.num_train=300", "data.corpora.toy.num_val=10", "data.corpora.toy.num_test=10",
        "trainer.max_epochs=1", "~callbacks.epoch_checkpoint"]


class Sabotage(L.Callback):
    """In job `fail_job` of a multirun: raises TrainingDiverged. In job `kill_job`: SIGKILLs the whole
    sweep process the first time (a marker file remembers that it happened)."""

    def __init__(self, marker: str, fail_job: int = -1, kill_job: int = -1) -> None:
        self.marker, self.fail_job, self.kill_job = Path(marker), fail_job, kill_job

    def on_train_start(self, trainer, module) -> None:
        job = HydraConfig.get().job.num
        if job == self.fail_job:
            raise TrainingDiverged("train: loss nan at step 1 (lr 1), on purpose")
        if job == self.kill_job and not self.marker.exists():
            self.marker.touch()
            os.kill(os.getpid(), signal.SIGKILL)


class RankReport(L.Callback):
    """Each DDP rank writes rank<N>.json (its model.heads and run directory) into its run directory."""

    def on_train_start(self, trainer, module) -> None:
        out = Path(trainer.default_root_dir)
        (out / f"rank{trainer.global_rank}.json").write_text(json.dumps(
            {"heads": module.hparams.model["heads"], "dir": str(out), "pid": os.getpid()}))


def test_an_optuna_search_killed_after_a_trial_continues_with_the_missing_trials_only(tmp_path):
    """3 trials; job 0 fails (reported to Optuna as failed, the study goes on), job 1 is killed with
    the sweep. Started again, the study runs only what is missing: 2 more trials, numbered 2 and 3."""
    sweep = tmp_path / "sweep"
    command = ["hparams_search=optuna", "hydra.sweeper.n_trials=3", f"hydra.sweep.dir={sweep}",
               f"paths.cache_dir={tmp_path}/cache", "optimized_metric=val/chrf", *TINY,
               f"+callbacks.sabotage._target_={__name__}.Sabotage", f"+callbacks.sabotage.marker={tmp_path}/killed",
               "+callbacks.sabotage.fail_job=0", "+callbacks.sabotage.kill_job=1"]
    first = run_py(*command)
    assert first.returncode == -signal.SIGKILL, first.stderr[-3000:]
    assert (sweep / "0" / "error.txt").read_text() == "TrainingDiverged: train: loss nan at step 1 (lr 1), on purpose\n"
    second = run_py(*command)
    assert second.returncode == 0, second.stderr[-3000:]
    study = optuna.load_study(study_name="transformer_mt", storage=f"sqlite:///{sweep}/optuna.db")
    states = [t.state.name for t in study.trials]
    assert states == ["FAIL", "FAIL", "COMPLETE", "COMPLETE"]
    assert [t.user_attrs.get("interrupted") for t in study.trials] == [None, True, None, None]
    assert not (sweep / "0" / "metrics.json").exists()  # the failed trial was not rerun
    values = [json.loads((sweep / str(n) / "metrics.json").read_text())["val/chrf"] for n in (2, 3)]
    assert [t.value for t in study.trials[2:]] == values
    results = OmegaConf.load(sweep / "optimization_results.yaml")
    assert results.best_value == max(values) == study.best_value
    assert set(results.best_params) == {"optim.optimizer.lr", "optim.scheduler.warmup_steps", "model.dropout",
                                        "module.label_smoothing", "model.num_encoder_layers",
                                        "model.num_decoder_layers"}
    third = run_py(*command)  # a finished study runs nothing more
    assert third.returncode == 0 and len(optuna.load_study(
        study_name="transformer_mt", storage=f"sqlite:///{sweep}/optuna.db").trials) == 4


def test_a_search_whose_metric_no_trial_writes_or_whose_every_trial_fails_ends_in_one_line(tmp_path):
    """optimized_metric misspelt: the study stops after its first trial, naming the metrics the trial
    wrote (not 20 trials and Optuna's traceback). Every trial failed: one line saying where why is."""
    common = ["hparams_search=optuna", f"paths.cache_dir={tmp_path}/cache", *TINY, "trainer.max_steps=2"]
    result = run_py(*common, "optimized_metric=val/blue", "hydra.sweeper.n_trials=3", f"hydra.sweep.dir={tmp_path}/a")
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert result.stderr.strip().splitlines()[-1].startswith(
        f"error: optimized_metric=val/blue: job 0 finished without it in {tmp_path}/a/0/metrics.json "
        "(it has test/bleu, ")
    assert "val/bleu_best" in result.stderr and not (tmp_path / "a" / "1").exists()
    result = run_py(*common, "model.heads=3", "hydra.sweeper.n_trials=2", f"hydra.sweep.dir={tmp_path}/b")
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert result.stderr.strip().splitlines()[-1] == (
        f"error: no trial of study transformer_mt finished: each failed one's reason is in error.txt in its run "
        f"directory under {tmp_path}/b")
    assert (tmp_path / "b" / "1" / "error.txt").read_text().startswith("ConfigError: model.d_model=64 is not divisible")


def test_submitit_local_runs_every_job_of_a_multirun(tmp_path):
    result = run_py("-m", "hydra/launcher=submitit_local", "model.heads=2,4", f"hydra.sweep.dir={tmp_path}/sweep",
                    f"paths.cache_dir={tmp_path}/cache", *TINY)
    assert result.returncode == 0, result.stderr[-3000:]
    for job, heads in ((0, 2), (1, 4)):
        metrics = json.loads((tmp_path / "sweep" / str(job) / "metrics.json").read_text())
        assert "test/bleu" in metrics
        assert OmegaConf.load(tmp_path / "sweep" / str(job) / "config.yaml").model.heads == heads
    assert list((tmp_path / "sweep" / ".submitit").iterdir())  # submitit ran them


def test_submitit_slurm_preset_asks_slurm_for_one_task_per_gpu(tmp_path, monkeypatch):
    """The sbatch script submitit would submit for `trainer=ddp trainer.devices=4 trainer.num_nodes=2`
    (built the launcher's way; this machine has no `srun`, so submitit is told it has)."""
    import submitit

    monkeypatch.setattr(submitit.SlurmExecutor, "affinity", classmethod(lambda cls: 2))
    from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf

    cfg = compose_config(tmp_path, ["hydra/launcher=submitit_slurm", "trainer=ddp", "trainer.devices=4",
                                    "trainer.num_nodes=2", "hydra.launcher.partition=gpu"])
    params = OmegaConf.to_container(cfg.hydra.launcher, resolve=True)
    params.pop("_target_")
    executor = submitit.AutoExecutor(cluster="slurm", folder=str(tmp_path / "submitit"))
    base = set(OmegaConf.structured(BaseQueueConf).keys())
    executor.update_parameters(**{k if k in base else f"slurm_{k}": v for k, v in params.items()
                                  if k not in ("submitit_folder", "max_num_timeout")})
    script = executor._executor._make_submission_file_text("python run.py", "uid")
    for line in ("#SBATCH --gpus-per-node=4", "#SBATCH --ntasks-per-node=4", "#SBATCH --nodes=2",
                 "#SBATCH --partition=gpu", "#SBATCH --signal=USR1@120", "#SBATCH --time=240"):
        assert line in script, script


def test_multirun_with_ddp_runs_each_job_on_both_ranks_in_its_own_directory(tmp_path):
    """`python run.py -m model.heads=2,4 trainer=ddp_cpu`: every rank of a job trains that job's config
    and writes into that job's run directory; no rank starts another sweep. (No validation: nothing
    here reads it.)"""
    result = run_py("-m", "model.heads=2,4", "trainer=ddp_cpu", f"hydra.sweep.dir={tmp_path}/sweep",
                    f"paths.cache_dir={tmp_path}/cache", *TINY, "trainer.limit_val_batches=0",
                    f"+callbacks.ranks._target_={__name__}.RankReport", timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    assert sorted(p.name for p in (tmp_path / "sweep").iterdir() if p.is_dir()) == ["0", "1"]
    for job, heads in ((0, 2), (1, 4)):
        folder = tmp_path / "sweep" / str(job)
        ranks = [json.loads((folder / f"rank{r}.json").read_text()) for r in range(2)]
        assert [r["heads"] for r in ranks] == [heads, heads]
        assert {r["dir"] for r in ranks} == {str(folder)} and ranks[0]["pid"] != ranks[1]["pid"]
        assert (folder / "metrics.json").is_file() and (folder / "train_ddp_process_1.log").is_file()


def test_report_lists_every_job_with_the_failed_one_marked(tmp_path):
    """A 3-job sweep whose job 1 fails: report.md / .csv have all three rows, the base marked."""
    sweep = tmp_path / "sweep"
    result = run_py("-m", "model.heads=2,4,8", f"hydra.sweep.dir={sweep}", f"paths.cache_dir={tmp_path}/cache",
                    *TINY, f"+callbacks.sabotage._target_={__name__}.Sabotage",
                    f"+callbacks.sabotage.marker={tmp_path}/m", "+callbacks.sabotage.fail_job=1")
    assert result.returncode != 0  # Hydra's basic sweeper reports the failure after running every job
    assert (sweep / "2" / "metrics.json").is_file()
    report = run(compose_config(tmp_path / "report_run", ["task=report", f"task.sweep_dir={sweep}"]))
    text = (sweep / "report.md").read_text()
    lines = text.split("## Jobs")[1].strip().splitlines()
    assert lines[0].split(" | ")[:4] == ["| job", "model.heads", "seed", "status"]
    body = [line.split(" | ") for line in lines[2:]]
    failure = "failed: TrainingDiverged: train: loss nan at step 1 (lr 1), on purpose"
    assert [row[:2] + row[3:4] for row in body] == [["| 0", "2", "done"], ["| 1 (base)", "4", failure],
                                                   ["| 2", "8", "done"]]
    metrics = json.loads((sweep / "2" / "metrics.json").read_text())
    header = [h.strip("| ") for h in lines[0].split(" | ")]
    for name, key in (("test BLEU", "test/bleu"), ("test chrF", "test/chrf"), ("test TER", "test/ter")):
        assert body[2][header.index(name)].strip("| ") == f"{metrics[key]:.2f}"
    assert "- row 0 (model.heads=2): no seed finished in both this row and the base row: not tested" in text
    assert len((sweep / "jobs.csv").read_text().splitlines()) == 4 and report["rows"] == 3
    assert (sweep / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert report["curves"] == 2 and (sweep / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_without_the_optuna_plugin_hydra_starts_without_an_import_error():
    """A machine with Hydra but not its Optuna sweeper (the GPU image): Hydra imports every module
    of hydra_plugins at start, and ours must not make it warn on every run."""
    script = ("import sys, warnings; sys.modules['hydra_plugins.hydra_optuna_sweeper'] = None\n"
              "warnings.simplefilter('error')\n"
              "from hydra.core.plugins import Plugins\n"
              "from hydra.plugins.sweeper import Sweeper\n"
              "names = [p.__name__ for p in Plugins.instance().discover(Sweeper)]\n"
              "assert 'SummarizingSweeper' in names and 'OptunaSweeper' not in names, names\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and "Error importing" not in result.stderr, result.stderr[-2000:]


def test_a_sweep_with_ckpt_path_last_run_again_trains_only_the_job_that_did_not_finish(tmp_path):
    """The same multirun command twice (ckpt_path=last, a fixed hydra.sweep.dir), its job 1 failing the
    first time: the second time job 0 is left as it is (nothing of its rewritten) and job 1 trains, so
    that every job is done."""
    sweep = tmp_path / "sweep"
    command = ["-m", "model.heads=2,4", "ckpt_path=last", f"hydra.sweep.dir={sweep}",
               f"paths.cache_dir={tmp_path}/cache", *TINY]
    first = run_py(*command, f"+callbacks.sabotage._target_={__name__}.Sabotage",
                   f"+callbacks.sabotage.marker={tmp_path}/m", "+callbacks.sabotage.fail_job=1")
    assert first.returncode != 0 and not (sweep / "1" / "metrics.json").exists()
    done = {p: p.stat().st_mtime_ns for p in (sweep / "0").rglob("*")
            if p.is_file() and p.suffix not in (".yaml", ".log")}
    assert any(p.name == "metrics.json" for p in done)
    again = run_py(*command)
    assert again.returncode == 0, again.stderr[-3000:]
    assert {p: p.stat().st_mtime_ns for p in done} == done
    assert (sweep / "0" / "metrics.json").is_file() and (sweep / "1" / "metrics.json").is_file()
