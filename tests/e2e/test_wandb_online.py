"""`logger=wandb logger.wandb.offline=false` where wandb cannot work: without network, or without an
API key, the run stops within seconds with one line naming `logger.wandb.offline=true` (not a
traceback after wandb's 90-second wait), before anything but the config is written.

The wandb server is a local address (no test depends on the internet): a closed port, or a socket
that accepts connections and drops them. HOME is a fresh folder (no ~/.netrc key) and every WANDB_
or proxy variable is unset, so wandb sees what a new user's machine would give it."""

import os
import socket
import subprocess
import threading
import time
from collections.abc import Iterator

import pytest

from tests.helpers import ROOT, assert_clean_failure, assert_nothing_half_written, python

pytestmark = pytest.mark.cli  # messages, statuses and files: not run again under the portable profile

TOY = ["data.corpora.toy.num_train=600", "data.corpora.toy.num_val=20", "data.corpora.toy.num_test=20"]
PROXIES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")


def online_run(tmp_path, server: str, **env: str) -> tuple[subprocess.CompletedProcess, float]:
    """`python run.py logger=wandb logger.wandb.offline=false` against the wandb server `server`;
    the result and its wall time in seconds."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_") and k not in PROXIES}
    (tmp_path / "home").mkdir()
    clean |= {"HOME": str(tmp_path / "home"), "WANDB_BASE_URL": server, "WANDB_SILENT": "true",
              "PYTHONWARNINGS": "ignore", **env}
    start = time.monotonic()
    result = subprocess.run([python(clean), str(ROOT / "run.py"), "logger=wandb", "logger.wandb.offline=false", *TOY,
                             f"hydra.run.dir={tmp_path}/run", f"paths.cache_dir={tmp_path}/cache"],
                            cwd=ROOT, env=clean, capture_output=True, text=True, timeout=150)
    return result, time.monotonic() - start


@pytest.fixture
def closed_port() -> int:
    """A local port nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def dropping_server() -> Iterator[int]:
    """A local port that accepts connections and closes them at once (a server that is there but
    says nothing): its port."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                server.accept()[0].close()
            except TimeoutError:
                continue

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    server.close()


def test_no_network_is_one_line_naming_offline_within_seconds(tmp_path, closed_port):
    result, seconds = online_run(tmp_path, f"http://127.0.0.1:{closed_port}", WANDB_API_KEY="a" * 40)
    assert_clean_failure(result, f"error: logger.wandb.offline=false: cannot reach the wandb server "
                                 f"127.0.0.1:{closed_port} (Connection refused); set logger.wandb.offline=true")
    assert seconds < 60, seconds  # the process's start and the config; wandb alone waits 90 s and more
    assert_nothing_half_written(tmp_path)


def test_no_api_key_is_one_line_naming_offline(tmp_path, dropping_server):
    result, seconds = online_run(tmp_path, f"http://127.0.0.1:{dropping_server}")
    assert_clean_failure(result, "error: logger.wandb.offline=false: wandb did not start (UsageError: No API key "
                                 "configured.")
    assert "set logger.wandb.offline=true" in result.stderr.splitlines()[-1]
    assert seconds < 60, seconds
    assert_nothing_half_written(tmp_path)
