"""The submit benchmark's server: gunicorn on `config.wsgi` in its own process group.

It runs with the throwaway database and the cache it is given, `DEBUG` off and the
login rate limit per address off (the clients all log in from one address at once).
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import time
from pathlib import Path
from typing import IO

from common import REPO_ROOT
from submit_fixture import BenchError
from submit_load import WebClient

from soak.processes import free_port


class Gunicorn:
    """gunicorn running `config.wsgi` with 2 sync workers, in its own process group."""

    def __init__(
        self, workers: int, threads: int, log: IO[bytes], *, database_url: str, cache_url: str
    ) -> None:
        self.port = free_port()
        self.log = log
        env = {
            **os.environ,
            "DATABASE_URL": database_url,
            "DEBUG": "0",
            "SECRET_KEY": secrets.token_urlsafe(32),
            "ALLOWED_HOSTS": "127.0.0.1",
            "CELERY_BROKER_URL": "",
            "CACHE_URL": cache_url,
            # The 16 logins come from one address within a second: not a password guesser.
            "LOGIN_RATE_PER_IP": "off",
            "LOG_LEVEL": "WARNING",
        }
        self.process = subprocess.Popen(
            [
                str(REPO_ROOT / ".venv" / "bin" / "gunicorn"),
                "config.wsgi",
                "-w",
                str(workers),
                "--threads",
                str(threads),
                "-b",
                f"127.0.0.1:{self.port}",
            ],
            cwd=REPO_ROOT,
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own group: stopping it stops its workers too
        )

    def wait_healthy(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise BenchError(f"gunicorn exited with {self.process.returncode}:\n{self.tail()}")
            try:
                status, _ = WebClient(self.port).request("GET", "/api/health/")
                if status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise BenchError(f"gunicorn did not answer /api/health/ in {timeout:.0f} s:\n{self.tail()}")

    def worker_pids(self) -> list[int]:
        path = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children")
        try:
            return [int(pid) for pid in path.read_text().split()]
        except OSError:
            return []

    def tail(self, lines: int = 30) -> str:
        self.log.flush()
        self.log.seek(0)
        return "\n".join(self.log.read().decode(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGTERM)
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
            except ProcessLookupError:
                pass


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU time of these processes (Linux /proc), in seconds."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / ticks
