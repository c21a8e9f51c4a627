"""The submit benchmark's server: gunicorn on `config.wsgi` in its own process group.

It runs with the throwaway database and the cache it is given, `DEBUG` off and the
login rate limit per address off (the clients all log in from one address at once).
"""

from __future__ import annotations

import os
import re
import secrets
import time
from pathlib import Path

from submit_fixture import BenchError
from submit_load import WebClient

from soak.processes import free_port, gunicorn


class Gunicorn:
    """gunicorn running `config.wsgi` with the benchmark's settings, in its own process group.

    The process itself is the soak run's `Service` (start, stop, workers, log tail).
    """

    def __init__(
        self, workers: int, threads: int, log_dir: Path, *, database_url: str, cache_url: str
    ) -> None:
        self.port = free_port()
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
        self.service = gunicorn(env, log_dir, port=self.port, workers=workers, threads=threads)
        self.service.start()

    def wait_healthy(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.service.alive():
                code = self.service.process.returncode
                raise BenchError(f"gunicorn exited with {code}:\n{self.tail()}")
            try:
                status, _ = WebClient(self.port).request("GET", "/api/health/")
                if status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise BenchError(f"gunicorn did not answer /api/health/ in {timeout:.0f} s:\n{self.tail()}")

    def worker_pids(self) -> list[int]:
        return self.service.children()

    def tail(self, lines: int = 30) -> str:
        return self.service.tail(lines)

    def stop(self) -> None:
        self.service.stop()


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


def dockerfile_workers(default: int = 3) -> int:
    """The gunicorn worker count that production runs: the Dockerfile's `--workers`."""
    dockerfile = Path(__file__).resolve().parents[1] / "Dockerfile"
    text = dockerfile.read_text() if dockerfile.is_file() else ""
    found = re.search(r'"--workers",\s*"(\d+)"', text)
    return int(found.group(1)) if found else default
