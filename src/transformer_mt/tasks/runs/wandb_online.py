"""An online wandb logger (`logger.wandb.offline=false`) starts its run when the trainer is built,
not at the first logged value, and first checks that the wandb server can be reached: a machine
without network, or without an API key, stops the run at once with one line naming
`logger.wandb.offline=true`, instead of a traceback after wandb's 90-second wait.

Failing, rather than falling back to offline logging, because the config asked for online logging:
a run that silently logs somewhere else is found out only when its dashboard stays empty.
"""

import os
import socket
from urllib.parse import urlparse

from lightning.pytorch.loggers import Logger, WandbLogger
from lightning.pytorch.utilities import rank_zero_only

from transformer_mt.errors import ConfigError

OFFLINE_MODES = ("offline", "dryrun", "disabled")  # WANDB_MODE values under which wandb needs no server
PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")


def start_online(logger: Logger, key: str, timeout: float = 5.0) -> None:
    """If `logger` is a wandb logger that logs online (config key `logger.<key>`), start its run now
    (on global rank 0, where wandb runs); ConfigError in one line if the server cannot be reached in
    `timeout` seconds or wandb does not start (no API key, rejected key)."""
    if not isinstance(logger, WandbLogger) or getattr(rank_zero_only, "rank", 0) != 0:
        return
    import wandb

    settings = wandb.setup().settings
    if settings.mode in OFFLINE_MODES:
        return
    fix = f"set logger.{key}.offline=true to log offline (`wandb sync` uploads it later)"
    if not any(os.environ.get(name) for name in PROXY_VARIABLES):  # through a proxy only wandb can tell
        server = urlparse(settings.base_url)
        port = server.port or (443 if server.scheme == "https" else 80)
        try:
            socket.create_connection((server.hostname, port), timeout=timeout).close()
        except OSError as err:
            raise ConfigError(f"logger.{key}.offline=false: cannot reach the wandb server {server.hostname}:{port} "
                              f"({err.strerror or err}); {fix}") from None
    try:
        logger.experiment  # noqa: B018 (creating it starts the wandb run)
    except wandb.errors.Error as err:
        reason = str(err).strip().splitlines()[0] if str(err).strip() else ""
        raise ConfigError(f"logger.{key}.offline=false: wandb did not start ({type(err).__name__}: {reason}); "
                          f"{fix}") from None
