"""The soak run's own stack: a private PostgreSQL and Redis, gunicorn and Celery workers.

Everything runs on free local ports from a temporary folder, so the run can kill and
restart any part without touching the machine's own services.
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


class SoakError(RuntimeError):
    """The run cannot go on; the message says why."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def wait_until(check, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise SoakError(f"{what}: not ready after {timeout:.0f} s")
        time.sleep(0.1)


class Service:
    """A command in its own process group, logging to a file; it can be killed and started."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str], log_dir: Path) -> None:
        self.name = name
        self.argv = argv
        self.env = env
        self.log_path = log_dir / f"{name}.log"
        self.process: subprocess.Popen | None = None

    def start(self) -> Service:
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            self.argv,
            cwd=ROOT,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own group: stopping it stops its children too
        )
        log.close()
        return self

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def children(self) -> list[int]:
        if not self.alive():
            return []
        path = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children")
        try:
            return [int(pid) for pid in path.read_text().split()]
        except OSError:
            return []

    def kill(self) -> None:
        """SIGKILL the whole group, as an out-of-memory kill or a pulled plug would."""
        self._signal(signal.SIGKILL)

    def stop(self, timeout: float = 30.0) -> None:
        self._signal(signal.SIGTERM, timeout=timeout)

    def _signal(self, sig: int, timeout: float = 30.0) -> None:
        if not self.alive():
            return
        try:
            os.killpg(self.process.pid, sig)
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        except ProcessLookupError:
            pass

    def tail(self, lines: int = 40, *, skip: str = "recover_tasks") -> str:
        """The log's last lines, less those naming `skip` (the watchdog's every-2-s beat)."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        kept = [line for line in text.splitlines() if skip not in line]
        return "\n".join(kept[-lines:])


def _pg_bin(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}")) or [shutil.which(name)]
    if not found[-1]:
        raise SoakError(f"PostgreSQL's {name} is not installed (Debian: postgresql)")
    return found[-1]


class PrivatePostgres:
    """A throwaway PostgreSQL cluster (trust auth) on a free port, stopped and started at will.

    As root, the server runs as the `postgres` account (PostgreSQL refuses root).
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.data = folder / "pgdata"
        self.port = free_port()
        self._as_postgres = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []

    def url(self, database: str) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"

    def init(self) -> PrivatePostgres:
        self.folder.mkdir(parents=True, exist_ok=True)
        if self._as_postgres:
            shutil.chown(self.folder, "postgres")
        self._run(_pg_bin("initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres")
        return self.start()

    def start(self) -> PrivatePostgres:
        options = f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run(
            _pg_bin("pg_ctl"), "-D", str(self.data), "-l", str(self.folder / "pg.log"),
            "-o", options, "-w", "start",
        )  # fmt: skip
        return self

    def stop(self) -> None:
        """Fast shutdown: open connections are cut, as in a database restart."""
        if (self.data / "postmaster.pid").exists():
            self._run(_pg_bin("pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")

    def create_database(self, name: str) -> str:
        self._run(
            _pg_bin("createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", name
        )
        return self.url(name)

    def _run(self, *argv: str) -> None:
        done = subprocess.run(
            [*self._as_postgres, *argv], capture_output=True, text=True, cwd=self.folder
        )
        if done.returncode:
            raise SoakError(f"{Path(argv[0]).name} failed: {done.stderr.strip() or done.stdout}")


class PrivateRedis:
    """A throwaway redis-server (nothing kept on disk) on a free port."""

    def __init__(self, folder: Path) -> None:
        self.port = free_port()
        server = shutil.which("redis-server")
        if not server:
            raise SoakError("redis-server is not installed (Debian: redis-server)")
        argv = [server, "--bind", "127.0.0.1", "--port", str(self.port), "--save", "",
                "--appendonly", "no"]  # fmt: skip
        self.service = Service("redis", argv, dict(os.environ), folder)

    def url(self, database: int) -> str:
        return f"redis://127.0.0.1:{self.port}/{database}"

    def start(self) -> PrivateRedis:
        self.service.start()
        wait_until(lambda: port_open(self.port), "redis-server")
        return self

    def stop(self) -> None:
        self.service.kill()  # a crash: whatever it held in memory is gone


def gunicorn(
    env: dict[str, str], log_dir: Path, *, port: int, workers: int, threads: int
) -> Service:
    """gunicorn on `config.wsgi` at 127.0.0.1:`port`, logging to log_dir/gunicorn.log."""
    argv = [
        sys.executable, "-m", "gunicorn", "config.wsgi",
        "-w", str(workers), "--threads", str(threads),
        "-b", f"127.0.0.1:{port}", "--graceful-timeout", "5",
    ]  # fmt: skip
    return Service("gunicorn", argv, env, log_dir)


def celery_worker(env: dict[str, str], log_dir: Path, name: str) -> Service:
    """One Celery worker (solo pool) with Celery beat inside it, so the watchdog runs."""
    argv = [
        sys.executable, "-m", "celery", "-A", "config", "worker", "--pool", "solo",
        "--beat", "--schedule", str(log_dir / f"beat-{name}"), "--without-gossip",
        "--without-mingle", "--loglevel", "info", "-n", f"{name}@soak",
    ]  # fmt: skip
    return Service(name, argv, env, log_dir)
