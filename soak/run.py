"""`make soak`: the platform's guarantees under kills, restarts and load, in one JSON line.

    python -m soak.run [--submissions 10000] [--clients 32] [--next-hit 1000] [--parts ...]
        [--mturk-genuine 40] [--mturk-forged 1000] [--mturk-forged-addresses 4]

Builds its own stack in a temporary folder (PostgreSQL, Redis, gunicorn, Celery workers
with beat), never the machine's services, and prints one JSON summary; the exit status is
1 when a promised zero is not zero. docs/soak.md explains each figure.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import signal
import sys
import tempfile
from pathlib import Path
from typing import Any

from .client import request
from .mturk import mturk_env
from .mturk_standin import MTurkStandIn
from .processes import PrivatePostgres, PrivateRedis, Service, free_port, gunicorn, wait_until

PARTS = ("stages", "next-hit", "submissions", "mturk")
STAGES = ("retrieving", "pooling", "building", "aggregating")
# The figures that must be zero for the run to pass.
PROMISED_ZEROS = {
    "submissions": (
        "lost",
        "mismatched",
        "duplicated",
        "over_limit",
        "refused",
        "server_errors_other_than_503",
    ),
    "next_hit": ("over_assignment", "workers_with_two"),
    "stages": ("different_releases",),
    "mturk": (
        "genuine_lost",
        "genuine_refused",
        "forged_confirmed",
        "server_errors_other_than_503",
    ),
}


class Stack:
    """The run's private services and the environment every process of it shares."""

    def __init__(
        self,
        folder: Path,
        *,
        gunicorn_workers: int,
        fault_pauses: str,
        standin: MTurkStandIn | None = None,
    ) -> None:
        self.folder = folder
        self.postgres = PrivatePostgres(folder / "postgres")
        self.redis = PrivateRedis(folder)
        self.port = free_port()
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "DATABASE_URL": self.postgres.url("soak"),
            "CACHE_URL": self.redis.url(1),
            "CELERY_BROKER_URL": self.redis.url(2),
            "SECRET_KEY": secrets.token_urlsafe(40),
            "DEBUG": "0",
            "ALLOWED_HOSTS": "127.0.0.1",
            "LOGIN_RATE_PER_IP": "off",
            "MITL_VAR_DIR": str(folder / "var"),
            "MEDIA_ROOT": str(folder / "media"),
            "RELEASES_DIR": str(folder / "releases"),
            "HF_HUB_OFFLINE": "1",
            "LOG_LEVEL": "WARNING",
            # Lost stages are found in seconds here (production: a minute and a half).
            "TASK_HEARTBEAT_S": "1",
            "TASK_STALE_S": "4",
            "TASK_RECOVER_EVERY_S": "2",
        }
        if standin is not None:  # the `mturk` part: MTurk is the run's stand-in
            self.env.update(mturk_env(standin, self.port))
        web_env = {**self.env, "MITL_FAULT_PAUSES": fault_pauses}
        self.gunicorn: Service = gunicorn(
            web_env, folder, port=self.port, workers=gunicorn_workers, threads=4
        )

    def start(self) -> None:
        from .world import django_start

        self.postgres.init()
        self.postgres.create_database("soak")
        self.redis.start()
        django_start(self.env)
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        self.gunicorn.start()
        wait_until(self.healthy, f"gunicorn:\n{self.gunicorn.tail()}")

    def healthy(self) -> bool:
        status, _ = request(self.port, "GET", "/api/health/")
        return status == 200

    def kill_pid(self, pid: int) -> None:
        with contextlib.suppress(ProcessLookupError):  # it died already
            os.kill(pid, signal.SIGKILL)

    def take_down(self, part: str) -> None:
        """Stop Redis (a crash: its memory is lost) or PostgreSQL (fast shutdown)."""
        (self.redis if part == "redis" else self.postgres).stop()

    def bring_back(self, part: str) -> None:
        (self.redis if part == "redis" else self.postgres).start()

    def stop(self) -> None:
        from django.db import connections

        connections.close_all()
        self.gunicorn.stop()
        self.redis.stop()
        self.postgres.stop()


def soak_run(args: argparse.Namespace) -> dict[str, Any]:
    """Run the chosen parts on a fresh stack; the summary of each, and whether all held."""
    with tempfile.TemporaryDirectory(prefix="mitl-soak-") as tmp:
        folder = Path(tmp)
        os.chmod(folder, 0o755)  # PostgreSQL's own account reads its folder inside it
        standin = MTurkStandIn().start() if "mturk" in args.parts else None
        stack = Stack(
            folder,
            gunicorn_workers=args.gunicorn_workers,
            fault_pauses="submit=0.02",
            standin=standin,
        )
        try:
            stack.start()
            summary = _parts_run(stack, standin, args)
        finally:
            stack.stop()
            if standin is not None:
                standin.stop()
    broken = [
        f"{part}.{name}"
        for part, names in PROMISED_ZEROS.items()
        if part in summary
        for name in names
        if summary[part][name]
    ]
    return {"passed": not broken, "broken": broken, **summary}


def _parts_run(stack: Stack, standin: MTurkStandIn | None, args: argparse.Namespace):
    """The chosen parts, in order; the `mturk` flood runs during `submissions` if both run."""
    from .load import next_hit_storm, submissions_run
    from .mturk import MTurkFlood
    from .mturk_checks import mturk_report
    from .stages import stage_kills_run

    summary: dict[str, Any] = {}
    flood = None
    if standin is not None:
        flood = MTurkFlood(
            stack,
            standin,
            genuine=args.mturk_genuine,
            forged=args.mturk_forged,
            forged_addresses=args.mturk_forged_addresses,
            forged_hits=args.mturk_forged_hits,
        )
    if "stages" in args.parts:
        summary["stages"] = stage_kills_run(stack, stages=args.stages)
    if "next-hit" in args.parts:
        summary["next_hit"] = next_hit_storm(stack, requests=args.next_hit)
    if flood is not None:
        flood.prepare()
    if "submissions" in args.parts:
        summary["submissions"] = submissions_run(
            stack,
            submissions=args.submissions,
            clients=args.clients,
            kill_every_s=args.kill_every,
            outage_s=args.outage,
            alongside=flood.load if flood is not None else None,
        )
    elif flood is not None:
        flood.load()
    if flood is not None:
        summary["mturk"] = mturk_report(flood)
    return summary


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m soak.run", description=__doc__.split("\n")[0])
    p.add_argument("--submissions", type=int, default=10_000, help="whole HITs (10000)")
    p.add_argument("--clients", type=int, default=32, help="concurrent workers (32)")
    p.add_argument("--next-hit", type=int, default=1000, help="simultaneous next-HIT (1000)")
    p.add_argument("--gunicorn-workers", type=int, default=3, help="gunicorn workers (3)")
    p.add_argument("--kill-every", type=float, default=2.0, help="s between worker kills (2)")
    p.add_argument("--outage", type=float, default=5.0, help="s Redis and PostgreSQL stay down")
    p.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS))
    p.add_argument("--stages", nargs="+", choices=STAGES, default=list(STAGES))
    p.add_argument(
        "--mturk-genuine",
        type=int,
        default=40,
        help="genuine MTurk assignments, 2 per HIT (40: 20 HITs)",
    )
    p.add_argument(
        "--mturk-forged",
        type=int,
        default=1000,
        help="forged attempts (open a HIT page with made-up ids, submit if let in) (1000)",
    )
    p.add_argument(
        "--mturk-forged-addresses",
        type=int,
        default=4,
        help="client addresses the forged attempts come from (4)",
    )
    p.add_argument(
        "--mturk-forged-hits",
        type=int,
        default=0,
        help="HITs the flood aims at, the first ones (0: all the genuine workers' HITs)",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    summary = soak_run(parser().parse_args(argv))
    print(json.dumps(summary), flush=True)
    return 0 if summary["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
