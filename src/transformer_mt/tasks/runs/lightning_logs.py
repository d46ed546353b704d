"""Lightning's log lines once, through the job's logging, and without its product tips.

Lightning gives its `lightning` logger a console handler of its own (`INFO: ...`), and its records
also propagate to the root logger, whose handlers Hydra set up (the console and run.log): every
line appeared twice on the console. Where the root logger has handlers, the console handlers
Lightning installed are removed, so its records are written once, by the job's handlers, and are
kept in run.log. Lightning's tips advertising its hosted services ("💡 Tip: ... litlogger") are
dropped, and so are its info lines on a TPU the machine lacks and on the run's own callbacks, and two
warnings no user can act on: torch's deprecation of a pytree check inside
Lightning (printed by every run), and, on a resume, the CSV logger's claim that the earlier log
files will be deleted (train.py keeps them: metrics.partN.csv).
"""

import logging
import warnings

LIGHTNING_LOGGERS = ("lightning", "lightning.pytorch", "lightning.fabric")
RANK_ZERO_LOGGERS = ("lightning.pytorch.utilities.rank_zero", "lightning.fabric.utilities.rank_zero")
TIP = "💡 Tip:"
# info lines of Lightning's that no user can act on: the TPU a machine lacks, and the run's own
# callbacks (its ModelSummary, the NaN guard the module adds) reported as overriding Lightning's
UNACTIONABLE = (TIP, "TPU available: False", "Trainer already configured with model summary callbacks",
                "The following callbacks returned in `LightningModule.configure_callbacks` will override")
NOT_ACTIONABLE = (r".*isinstance\(treespec, LeafSpec\)` is deprecated",
                  r"Experiment logs directory .* exists and is not empty\. Previous log files")


def drop_tips(record: logging.LogRecord) -> bool:
    """A logging filter: False for Lightning's product tips and its UNACTIONABLE lines."""
    return not str(record.msg).startswith(UNACTIONABLE)


def route_lightning_logs() -> None:
    """Lightning's records through the root logger's handlers only (when it has any), without tips."""
    if logging.getLogger().hasHandlers():
        for name in LIGHTNING_LOGGERS:
            logger = logging.getLogger(name)
            for handler in [h for h in logger.handlers if type(h) is logging.StreamHandler]:
                logger.removeHandler(handler)
            logger.propagate = True
    for name in RANK_ZERO_LOGGERS:
        logger = logging.getLogger(name)
        if drop_tips not in logger.filters:
            logger.addFilter(drop_tips)
    for message in NOT_ACTIONABLE:
        warnings.filterwarnings("ignore", message=message)
