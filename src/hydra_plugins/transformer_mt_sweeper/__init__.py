"""The Hydra Optuna sweeper, made resumable (Hydra instantiates plugins only from `hydra_plugins`).

Hydra imports every module under `hydra_plugins` at each start. On a machine without the Optuna
sweeper plugin (a GPU image that runs single jobs, say) this module still imports, so Hydra does
not print an import error on every run; `hparams_search=optuna` cannot work there.
"""

import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from hydra.core.utils import JobReturn, JobStatus

try:
    from hydra_plugins.hydra_optuna_sweeper.optuna_sweeper import OptunaSweeper
except ImportError:
    OptunaSweeper = object  # no Optuna plugin: the class below is not a sweeper, and nothing uses it

log = logging.getLogger(__name__)


class MissingMetric(Exception):
    """A trial finished without the metric the study optimizes (optimized_metric misspelt, say)."""


class CheckMetric:
    """A launcher's stand-in for the Optuna sweeper: it launches through `launcher` and stops the
    study at the first trial that finished without `key` (optimized_metric) in its metrics.json,
    rather than failing every trial of the study and ending in Optuna's traceback."""

    def __init__(self, launcher, key: str | None) -> None:
        self.launcher, self.key = launcher, key

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        results = self.launcher.launch(job_overrides, initial_job_idx=initial_job_idx)
        for result in results:
            if result.status != JobStatus.COMPLETED or result.return_value is not None:
                continue
            path = Path(result.hydra_cfg.hydra.runtime.output_dir) / "metrics.json"
            metrics = json.loads(path.read_text()) if path.is_file() else {}
            if self.key not in metrics:
                names = ", ".join(k for k, v in metrics.items() if isinstance(v, int | float) and "/" in k)
                raise MissingMetric(f"optimized_metric={self.key}: job {result.hydra_cfg.hydra.job.num} finished "
                                    f"without it in {path} (it has {names or 'no metric'}): name one of those")
        return results


class ResumableOptunaSweeper(OptunaSweeper):
    """OptunaSweeper that continues a stored study where it stopped.

    Started again with the same study (name and storage), it runs only the trials still missing
    from `n_trials`, numbers their jobs after the study's trials (so the run directories of
    finished trials are kept), and marks the trials a killed sweep left RUNNING as failed
    (user attribute `interrupted`; they do not count as done). One sweep process per study.
    """

    def setup(self, *, hydra_context, task_function, config) -> None:
        super().setup(hydra_context=hydra_context, task_function=task_function, config=config)
        self.sweeper.launcher = CheckMetric(self.sweeper.launcher, config.get("optimized_metric"))

    def sweep(self, arguments: list[str]) -> None:
        impl = self.sweeper
        storage = str(impl.storage) if impl.storage else None
        if storage and storage.startswith("sqlite:///"):
            Path(storage.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        if storage:
            self._continue_study(impl, storage)
        try:
            return super().sweep(arguments)
        except MissingMetric as err:
            stop(str(err))
        except ValueError:  # Optuna's own when the study has no best trial
            if storage and not self._completed(impl, storage):
                stop(f"no trial of study {impl.study_name} finished: each failed one's reason is in error.txt in its "
                     f"run directory under {Path(impl.config.hydra.sweep.dir)}")
            raise

    @staticmethod
    def _completed(impl, storage: str) -> bool:
        import optuna
        from optuna.trial import TrialState

        study = optuna.load_study(study_name=impl.study_name, storage=storage)
        return any(t.state == TrialState.COMPLETE for t in study.get_trials(deepcopy=False))

    @staticmethod
    def _continue_study(impl, storage: str) -> None:
        import optuna
        from optuna.trial import Trial, TrialState

        try:
            study = optuna.load_study(study_name=impl.study_name, storage=storage)
        except KeyError:  # no such study yet
            return
        for trial in study.trials:
            if trial.state == TrialState.RUNNING:
                Trial(study, trial._trial_id).set_user_attr("interrupted", True)
                study.tell(trial.number, state=TrialState.FAIL)
        trials = study.get_trials(deepcopy=False)
        done = [t for t in trials if t.state in (TrialState.COMPLETE, TrialState.PRUNED)
                or (t.state == TrialState.FAIL and not t.user_attrs.get("interrupted"))]
        log.info("study %s: %d of %d trials done; running %d more", impl.study_name, len(done), impl.n_trials,
                 max(0, impl.n_trials - len(done)))
        impl.n_trials = max(0, impl.n_trials - len(done))
        impl.job_idx = len(trials)


def stop(message: str) -> None:
    """End the search as a single run that fails ends: one line, exit status 1."""
    print(f"error: {message}", file=sys.stderr)
    sys.exit(1)
