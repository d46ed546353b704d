"""The Hydra Optuna sweeper, made resumable (Hydra instantiates plugins only from `hydra_plugins`).

Hydra imports every module under `hydra_plugins` at each start. On a machine without the Optuna
sweeper plugin (a GPU image that runs single jobs, say) this module still imports, so Hydra does
not print an import error on every run; `hparams_search=optuna` cannot work there.
"""

import logging
from pathlib import Path

try:
    from hydra_plugins.hydra_optuna_sweeper.optuna_sweeper import OptunaSweeper
except ImportError:
    OptunaSweeper = object  # no Optuna plugin: the class below is not a sweeper, and nothing uses it

log = logging.getLogger(__name__)


class ResumableOptunaSweeper(OptunaSweeper):
    """OptunaSweeper that continues a stored study where it stopped.

    Started again with the same study (name and storage), it runs only the trials still missing
    from `n_trials`, numbers their jobs after the study's trials (so the run directories of
    finished trials are kept), and marks the trials a killed sweep left RUNNING as failed
    (user attribute `interrupted`; they do not count as done). One sweep process per study.
    """

    def sweep(self, arguments: list[str]) -> None:
        impl = self.sweeper
        storage = str(impl.storage) if impl.storage else None
        if storage and storage.startswith("sqlite:///"):
            Path(storage.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        if storage:
            self._continue_study(impl, storage)
        return super().sweep(arguments)

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
