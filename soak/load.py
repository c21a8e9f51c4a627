"""The web side under fire: whole HITs submitted while gunicorn workers are killed and the
cache and database restart, and a storm of simultaneous "next HIT" requests.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import Any

from django.db import connections

from .client import DROPPED, Browser, request
from .world import annotating_batch, answers_for, browsers_make, ledger_check

RETRY_PAUSE_S = 0.2
RETRY_FOR_S = 90.0  # longer than any outage the run causes


@dataclass
class LoadStats:
    """What the clients saw: statuses per call, and the answers each 2xx confirmed."""

    statuses: Counter = field(default_factory=Counter)
    accepted: dict[int, list[dict]] = field(default_factory=dict)
    refused: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def saw(self, call: str, status: int) -> None:
        with self.lock:
            self.statuses[f"{call} {status or 'dropped'}"] += 1


def _until_answered(call: Callable[[], tuple[int, Any]], name: str, stats: LoadStats):
    """Call until the server answers something other than 503 or a dropped connection."""
    deadline = time.monotonic() + RETRY_FOR_S
    while True:
        status, body = call()
        stats.saw(name, status)
        if status not in (DROPPED, 503) or time.monotonic() > deadline:
            return status, body
        time.sleep(RETRY_PAUSE_S)


def _client_loop(browser: Browser, seed: int, tickets: Callable[[], bool], stats: LoadStats):
    rng = random.Random(seed)
    while tickets():
        status, page = _until_answered(
            lambda: browser.post_json("/api/assignments/next/"), "next", stats
        )
        if status == 204:
            return  # nothing left for this worker
        if status != 200:
            with stats.lock:
                stats.refused.append(f"next {status}: {page}")
            return
        answers = answers_for(page, rng)
        send = partial(browser.post_json, page["submit_url"], {"answers": answers})
        status, body = _until_answered(send, "submit", stats)
        with stats.lock:
            if status in (200, 201):
                stats.accepted[page["id"]] = answers
            else:
                stats.refused.append(f"submit {status}: {body}")


def _ticket_counter(total: int) -> tuple[Callable[[], bool], Callable[[], int]]:
    lock, handed = threading.Lock(), [0]

    def take() -> bool:
        with lock:
            if handed[0] >= total:
                return False
            handed[0] += 1
            return True

    return take, lambda: handed[0]


@dataclass
class Disruptions:
    """What was done to the stack during the load."""

    gunicorn_kills: int = 0
    redis_down_s: float = 0.0
    postgres_down_s: float = 0.0


def _outages(
    stack,
    submissions: int,
    outage_s: float,
    handed: Callable[[], int],
    done: threading.Event,
    disruptions: Disruptions,
) -> None:
    """Redis goes down at 35% of the HITs and stays down for `outage_s` or until 55%: the
    load goes on without it. PostgreSQL goes down at 65%, while clients still work."""
    for part, down_at, up_by in (("redis", 0.35, 0.55), ("postgres", 0.65, 1.0)):
        while handed() < submissions * down_at:
            if done.wait(0.05):
                return
        stack.take_down(part)
        down_since = time.monotonic()
        while time.monotonic() - down_since < outage_s and handed() < submissions * up_by:
            time.sleep(0.05)
        stack.bring_back(part)
        setattr(disruptions, f"{part}_down_s", round(time.monotonic() - down_since, 1))


def submissions_run(
    stack,
    *,
    submissions: int,
    clients: int,
    kill_every_s: float,
    outage_s: float,
    alongside: Callable[[Callable[[], float]], None] | None = None,
) -> dict[str, Any]:
    """`submissions` whole HITs from `clients` workers while the stack is disrupted.

    `alongside`: another load (the `mturk` part's) run in a thread during this one, given
    this one's progress (the share of HITs handed out); the disruptions go on until it ends.
    """
    batch_id = annotating_batch(
        "soak submissions", n_hits=submissions // 4 + clients, max_assignments=4
    )
    browsers = browsers_make("soak-s", clients, stack.port)
    take, handed = _ticket_counter(submissions)
    stats, done, disruptions = LoadStats(), threading.Event(), Disruptions()

    def killer() -> None:
        rng = random.Random(1)
        while not done.wait(kill_every_s):
            workers = stack.gunicorn.children()
            if workers:
                stack.kill_pid(rng.choice(workers))
                disruptions.gunicorn_kills += 1

    outages = partial(_outages, stack, submissions, outage_s, handed, done, disruptions)
    helpers = [threading.Thread(target=killer), threading.Thread(target=outages)]
    threads = [
        threading.Thread(target=_client_loop, args=(browser, i, take, stats))
        for i, browser in enumerate(browsers)
    ]
    clients_done = threading.Event()
    if alongside is not None:

        def progress() -> float:
            return 1.0 if clients_done.is_set() else handed() / submissions

        helpers.append(threading.Thread(target=alongside, args=(progress,)))
    started = time.monotonic()
    for thread in helpers + threads:
        thread.start()
    for thread in threads:
        thread.join()
    clients_done.set()
    seconds = time.monotonic() - started
    if alongside is not None:
        helpers[-1].join()  # the kills go on until the other load is done too
    done.set()
    for thread in helpers:
        thread.join()
    health, _ = request(stack.port, "GET", "/api/health/")
    connections.close_all()  # this process's connection died with the database restart
    ledger = ledger_check(batch_id, stats.accepted)
    server_errors = sum(n for key, n in stats.statuses.items() if key.split()[1].startswith("5"))
    unavailable = sum(n for key, n in stats.statuses.items() if key.endswith(" 503"))
    return {
        **asdict(ledger),
        "refused": len(stats.refused),
        "refused_examples": stats.refused[:3],
        "server_errors_other_than_503": server_errors - unavailable,
        "unavailable_503": unavailable,
        "dropped_connections": sum(n for k, n in stats.statuses.items() if k.endswith("dropped")),
        "health_after": health,
        "seconds": round(seconds, 1),
        **asdict(disruptions),
        "statuses": dict(sorted(stats.statuses.items())),
    }


def next_hit_storm(stack, *, requests: int) -> dict[str, Any]:
    """`requests` workers ask for a HIT at the same moment; slots for 60% of them."""
    from django.db.models import Count, F, Q

    from annotation.handout import ACTIVE_STATUSES
    from annotation.models import HIT, Assignment

    n_hits = max(1, requests // 5)
    batch_id = annotating_batch("soak storm", n_hits=n_hits, max_assignments=3)
    browsers = browsers_make("soak-n", requests, stack.port)
    gate = threading.Barrier(requests)
    statuses: Counter = Counter()
    lock = threading.Lock()

    def ask(browser: Browser) -> None:
        gate.wait()
        status, _ = browser.post_json("/api/assignments/next/")
        with lock:
            statuses[status] += 1

    threading.stack_size(256 * 1024)  # a thousand threads waiting on sockets
    threads = [threading.Thread(target=ask, args=(browser,)) for browser in browsers]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    threading.stack_size(0)
    given = Assignment.objects.filter(hit__batch_id=batch_id)
    over = (
        HIT.objects.filter(batch_id=batch_id)
        .annotate(live=Count("assignments", filter=Q(assignments__status__in=ACTIVE_STATUSES)))
        .filter(live__gt=F("max_assignments"))
        .count()
    )
    return {
        "requests": requests,
        "slots": n_hits * 3,
        "assigned": given.count(),
        "over_assignment": over,
        "workers_with_two": given.values("worker").annotate(n=Count("pk")).filter(n__gt=1).count(),
        "statuses": {str(k): v for k, v in sorted(statuses.items())},
        "seconds": round(time.monotonic() - started, 1),
    }
