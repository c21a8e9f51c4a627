"""Benchmark HIT submission over HTTP: gunicorn and PostgreSQL under concurrent workers.

Run from the repository root (``make bench`` does)::

    python benchmarks/bench_submit.py                  # 16 clients for 60 s
    python benchmarks/bench_submit.py --seconds 10     # a quick look

What it measures ("ours"): the production-like path. gunicorn (``config.wsgi``, 2 sync
workers, ``DEBUG=0``) on PostgreSQL, with Redis as the cache (sessions, login counts) as in
docker-compose.yml; 16 clients, each logged in as its own account, loop over
``POST /api/assignments/next/`` then ``POST /api/assignments/<id>/submit/`` with the 18
answers of the whole HIT (16 tasks + 1 golden TP + 1 golden TN). With ``--take-next`` the
submit hands out the next HIT as well (``?take_next=true``): one request per HIT, whose
latency then includes taking the next HIT. Reported: judgements stored per second and the
latency of the submit request (p50, p95).
The baseline, measured in the same run, is the floor for the same writes: the same 16
clients store the same judgements straight into PostgreSQL with psycopg2, one transaction
per HIT (one INSERT of the 18 rows and one UPDATE of the assignment, as the service writes
them), no web layer.
``ratio`` = baseline judgements/s / ours; lower is better, the target is at most 3, and the
p95 target is at most 150 ms.

The script creates its own database ``bench_submit`` on the server named by
``BENCH_POSTGRES_URL`` (default ``postgres://postgres@127.0.0.1:5432/``), dropped and
created again at every start and dropped at the end (``--keep-db`` keeps it). Nothing else
on the server is read or written; ``DATABASE_URL`` is ignored.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from http.cookies import SimpleCookie
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlencode

from common import REPO_ROOT, dataset_create, django_setup, report_line, threads_run

SERVER_URL = os.environ.get("BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/")
# gunicorn's cache, as docker-compose gives it one; its keys are prefixed per run.
CACHE_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/14")
DB_NAME = "bench_submit"
DATABASE_URL = SERVER_URL.rstrip("/") + "/" + DB_NAME
# This process and gunicorn both use the throwaway database, whatever the caller configured.
os.environ["DATABASE_URL"] = DATABASE_URL
django_setup()

import psycopg2  # noqa: E402
from django.conf import settings  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.contrib.auth.hashers import make_password  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.utils import timezone  # noqa: E402
from psycopg2.extras import execute_values  # noqa: E402

from annotation.models import (  # noqa: E402
    HIT,
    Assignment,
    Batch,
    BatchState,
    Candidate,
    Dataset,
    Direction,
    HITItem,
    ItemRole,
    Judgement,
    Query,
    Worker,
    WorkerSource,
)
from mitl.config import parse_batch_config  # noqa: E402
from mitl.judgements import Level, shortcomings_to_mask, wrong_concepts_to_mask  # noqa: E402
from mitl.quality import golden_check  # noqa: E402

HIT_SIZE = 16
ITEMS_PER_HIT = HIT_SIZE + 2  # + 1 golden TP + 1 golden TN
N_IMAGES = 500
CAPTIONS_PER_IMAGE = 5
# HITs made for "ours", all in one annotating batch: under three ECCV-Caption-size batches
# (2,902 HITs each), and more than 16 clients take in 60 s (80-115 HITs/s here). Finding the
# next free HIT reads every HIT of the annotating batches, so this number matters; it does
# not depend on --seconds, so short and long runs compare. A client that gets a 204 stops
# and the run is reported as cut short.
DEFAULT_HITS = 8_000
TARGET_RATIO = 3.0
P95_TARGET_MS = 150.0
PASSWORD = "bench-submit-password"
BATCH_CONFIG = {
    "annotators": ["bench"],
    "n_image_queries": N_IMAGES,
    "n_caption_queries": 0,
    "hit_size": HIT_SIZE,
    "followups": True,
    "golden_policy": "approve_or_flag",
}
# The answers' mix: mostly sure answers, and middle answers with valid follow-ups.
LEVEL_WEIGHTS = {Level.YES: 0.35, Level.WEAK_YES: 0.15, Level.WEAK_NO: 0.15, Level.NO: 0.35}
FOLLOWUPS = {
    Level.WEAK_YES: {"shortcomings": ["misses_main_concept"], "wrong_concepts": []},
    Level.WEAK_NO: {"shortcomings": ["wrong_description"], "wrong_concepts": ["color"]},
}


class BenchError(RuntimeError):
    """The run cannot go on; the message says why."""


# --------------------------------------------------------------------------- database


def database_recreate() -> None:
    """Drop `bench_submit` (closing its sessions) and create it empty."""
    admin = psycopg2.connect(SERVER_URL.rstrip("/") + "/postgres")
    admin.autocommit = True
    try:
        with admin.cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS {DB_NAME} WITH (FORCE)")
            cursor.execute(f"CREATE DATABASE {DB_NAME}")
    finally:
        admin.close()


def database_drop() -> None:
    connection.close()
    admin = psycopg2.connect(SERVER_URL.rstrip("/") + "/postgres")
    admin.autocommit = True
    try:
        with admin.cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS {DB_NAME} WITH (FORCE)")
    finally:
        admin.close()


@dataclass
class HitRows:
    """One HIT as the set-up made it: its items in page order and their roles."""

    hit_id: int
    item_ids: list[int]
    roles: list[str]


def batch_with_hits(
    dataset: Dataset,
    image_pks: list[int],
    caption_pks: list[int],
    name: str,
    n_hits: int,
    state: BatchState,
) -> list[HitRows]:
    """A batch in `state` with `n_hits` HITs of 16 tasks + 1 golden TP + 1 golden TN.

    The rows are built directly (what retrieval, pooling and building would have written),
    with bulk inserts: every task is a distinct candidate pair of the batch.
    """
    n_captions = len(caption_pks)
    if n_hits * HIT_SIZE > N_IMAGES * n_captions:
        raise BenchError(f"{n_hits} HITs need more distinct pairs than the dataset has")
    batch = Batch.objects.create(
        dataset=dataset,
        name=name,
        config=parse_batch_config(BATCH_CONFIG).to_json(),
        state=state,
    )
    queries = Query.objects.bulk_create(
        [Query(batch=batch, direction=Direction.I2T, image_id=pk) for pk in image_pks]
    )
    query_of = {q.image_id: q.pk for q in queries}
    candidates = Candidate.objects.bulk_create(
        [
            Candidate(
                batch=batch,
                query_id=query_of[image_pks[k % N_IMAGES]],
                direction=Direction.I2T,
                image_id=image_pks[k % N_IMAGES],
                caption_id=caption_pks[k // N_IMAGES],
            )
            for k in range(n_hits * HIT_SIZE)
        ],
        batch_size=5000,
    )
    hits = HIT.objects.bulk_create(
        [HIT(batch=batch, index=h, max_assignments=1) for h in range(n_hits)], batch_size=5000
    )
    rng = random.Random(f"{name}-{n_hits}")
    items: list[HITItem] = []
    layout: list[list[str]] = []
    for h, hit in enumerate(hits):
        roles = [ItemRole.TASK.value] * HIT_SIZE + [
            ItemRole.GOLDEN_TP.value,
            ItemRole.GOLDEN_TN.value,
        ]
        rng.shuffle(roles)
        layout.append(roles)
        tasks = iter(candidates[h * HIT_SIZE : (h + 1) * HIT_SIZE])
        for position, role in enumerate(roles):
            if role == ItemRole.TASK:
                candidate = next(tasks)
                image_id, caption_id = candidate.image_id, candidate.caption_id
            else:
                n = rng.randrange(N_IMAGES)
                own = caption_pks[n * CAPTIONS_PER_IMAGE]  # its own caption: a true positive
                other = caption_pks[((n + 1) % N_IMAGES) * CAPTIONS_PER_IMAGE]
                image_id = image_pks[n]
                caption_id = own if role == ItemRole.GOLDEN_TP else other
                candidate = None
            items.append(
                HITItem(
                    hit=hit,
                    position=position,
                    role=role,
                    candidate=candidate,
                    image_id=image_id,
                    caption_id=caption_id,
                )
            )
    items = HITItem.objects.bulk_create(items, batch_size=5000)
    return [
        HitRows(
            hit_id=hit.pk,
            item_ids=[item.pk for item in items[h * ITEMS_PER_HIT : (h + 1) * ITEMS_PER_HIT]],
            roles=layout[h],
        )
        for h, hit in enumerate(hits)
    ]


def workers_create(n: int) -> list[Worker]:
    """`n` accounts sharing one password hash (hashed once: set-up stays quick)."""
    user_model = get_user_model()
    password = make_password(PASSWORD)
    users = user_model.objects.bulk_create(
        [user_model(username=f"bench{c:02d}", password=password) for c in range(n)]
    )
    return Worker.objects.bulk_create(
        [
            Worker(user=user, source=WorkerSource.PLATFORM, external_id=user.username)
            for user in users
        ]
    )


# --------------------------------------------------------------------------- answers


def answers_make(rng: random.Random, item_ids: list[int]) -> list[dict[str, Any]]:
    """A whole HIT's answers as the page sends them: levels drawn, follow-ups where asked."""
    levels = rng.choices(list(LEVEL_WEIGHTS), weights=list(LEVEL_WEIGHTS.values()), k=len(item_ids))
    answers = []
    for item_id, level in zip(item_ids, levels, strict=True):
        followups = FOLLOWUPS.get(level, {"shortcomings": [], "wrong_concepts": []})
        answers.append(
            {
                "item": item_id,
                "level": level.value,
                "shortcomings": followups["shortcomings"],
                "wrong_concepts": followups["wrong_concepts"],
                "other_text": "",
                "elapsed_ms": rng.randrange(800, 8000),
            }
        )
    return answers


# --------------------------------------------------------------------------- HTTP side


class WebClient:
    """One logged-in browser: its cookies and CSRF token.

    A fresh connection per request: gunicorn's sync workers close it after every response.
    """

    def __init__(self, port: int) -> None:
        self.port = port
        self.cookies: dict[str, str] = {}

    def request(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        try:
            sent = dict(headers or {})
            if self.cookies:
                sent["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
            conn.request(method, path, body=body, headers=sent)
            response = conn.getresponse()
            data = response.read()
            for header in response.headers.get_all("Set-Cookie") or []:
                cookie = SimpleCookie()
                cookie.load(header)
                for name, morsel in cookie.items():
                    self.cookies[name] = morsel.value
            return response.status, data
        finally:
            conn.close()

    def login(self, username: str, password: str) -> None:
        status, _ = self.request("GET", "/accounts/login/")
        if status != 200 or "csrftoken" not in self.cookies:
            raise BenchError(f"GET /accounts/login/ answered {status} without a CSRF cookie")
        form = urlencode(
            {
                "username": username,
                "password": password,
                "csrfmiddlewaretoken": self.cookies["csrftoken"],
            }
        )
        status, _ = self.request(
            "POST",
            "/accounts/login/",
            form.encode(),
            {"Content-Type": "application/x-www-form-urlencoded"},
        )
        if status != 302 or "sessionid" not in self.cookies:
            raise BenchError(f"logging in {username} answered {status} without a session")

    def post_json(self, path: str, payload: Any | None) -> tuple[int, Any]:
        body = b"" if payload is None else json.dumps(payload).encode()
        status, data = self.request(
            "POST",
            path,
            body,
            {"Content-Type": "application/json", "X-CSRFToken": self.cookies["csrftoken"]},
        )
        if not data:
            return status, None
        try:
            return status, json.loads(data)
        except ValueError:
            raise BenchError(f"POST {path} answered {status}: {data[:300]!r}") from None


@dataclass
class ClientStats:
    """What one client did in the timed window."""

    hits: int = 0
    next_ms: list[float] = field(default_factory=list)
    submit_ms: list[float] = field(default_factory=list)
    # The answers of every timed HIT, in page order: the baseline writes them again.
    submitted: list[list[dict[str, Any]]] = field(default_factory=list)
    ran_out: bool = False
    finished_at: float = 0.0
    error: BaseException | None = None


def hit_work(
    client: WebClient, rng: random.Random, page: dict[str, Any], take_next: bool
) -> tuple[float, float, list[dict], dict[str, Any] | None]:
    """Submit `page` whole; return (next ms, submit ms, answers, the next page or None).

    With `take_next` the submit hands out the next HIT too (next ms is 0); otherwise the
    next HIT is asked for in a request of its own.
    """
    answers = answers_make(rng, [item["id"] for item in page["items"]])
    if len(answers) != ITEMS_PER_HIT:
        raise BenchError(f"a HIT page has {len(answers)} pairs, expected {ITEMS_PER_HIT}")
    url = page["submit_url"] + ("?take_next=true" if take_next else "")
    sent = time.perf_counter()
    status, result = client.post_json(url, {"answers": answers})
    done = time.perf_counter()
    if status != 201:
        raise BenchError(f"submit answered {status}: {result}")
    if take_next:
        return 0.0, (done - sent) * 1000, answers, result["next_assignment"]
    following = next_page(client)
    return (time.perf_counter() - done) * 1000, (done - sent) * 1000, answers, following


def next_page(client: WebClient) -> dict[str, Any] | None:
    """Take the next HIT in a request of its own; None when no HIT is free (204)."""
    status, page = client.post_json("/api/assignments/next/", None)
    if status == 204:
        return None
    if status != 200:
        raise BenchError(f"next HIT answered {status}: {page}")
    return page


def clients_run(
    port: int, n_clients: int, seconds: float, cpu_probe: Callable[[], float], take_next: bool
) -> tuple[list[ClientStats], float, float, float]:
    """Log every client in, warm up (one HIT each), then loop over whole HITs for `seconds`.

    Returns each client's stats, the timed window (from the common start to the moment the
    last client's last submit came back; a client starts no HIT after `seconds`), and the
    CPU seconds that `cpu_probe` and this process used in that window.
    """
    stats = [ClientStats() for _ in range(n_clients)]
    window: dict[str, float] = {}

    def start() -> None:  # the barrier runs it once, before any waiting thread is released
        window["cpu_probe"] = cpu_probe()
        window["cpu_here"] = time.process_time()
        window["start"] = time.perf_counter()

    ready = threading.Barrier(n_clients + 1, action=start)
    stop = threading.Event()

    def run(c: int) -> None:
        mine = stats[c]
        rng = random.Random(c)
        try:
            client = WebClient(port)
            client.login(f"bench{c:02d}", PASSWORD)
            page = next_page(client)
            if page is None:
                raise BenchError("no HIT for the warm-up: the set-up made too few")
            # Warm-up (imports, URL resolver, connections): one HIT each, then its next.
            page = hit_work(client, rng, page, take_next)[3]
            if page is None:
                raise BenchError("no second HIT after the warm-up: the set-up made too few")
        except BaseException as exc:
            mine.error = exc
            stop.set()
            ready.abort()
            return
        try:
            ready.wait()
        except threading.BrokenBarrierError:
            return
        deadline = window["start"] + seconds
        try:
            while not stop.is_set() and time.perf_counter() < deadline:
                next_ms, submit_ms, answers, page = hit_work(client, rng, page, take_next)
                mine.hits += 1
                mine.next_ms.append(next_ms)
                mine.submit_ms.append(submit_ms)
                mine.submitted.append(answers)
                if page is None:
                    mine.ran_out = True
                    break
        except BaseException as exc:
            mine.error = exc
            stop.set()
        mine.finished_at = time.perf_counter()

    threads_run(n_clients, run, ready)
    cpu_probe_used = cpu_probe() - window.get("cpu_probe", 0.0)
    cpu_here_used = time.process_time() - window.get("cpu_here", 0.0)
    for mine in stats:
        if mine.error is not None:
            raise BenchError(f"a client failed: {mine.error!r}") from mine.error
    end = max(mine.finished_at for mine in stats)
    return stats, end - window["start"], cpu_probe_used, cpu_here_used


# --------------------------------------------------------------------------- gunicorn


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Gunicorn:
    """gunicorn running `config.wsgi` with 2 sync workers, in its own process group."""

    def __init__(self, workers: int, threads: int, log: IO[bytes]) -> None:
        self.port = free_port()
        self.log = log
        env = {
            **os.environ,
            "DATABASE_URL": DATABASE_URL,
            "DEBUG": "0",
            "SECRET_KEY": secrets.token_urlsafe(32),
            "ALLOWED_HOSTS": "127.0.0.1",
            "CELERY_BROKER_URL": "",
            "CACHE_URL": CACHE_URL,
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


# --------------------------------------------------------------------------- baseline


@dataclass
class BaselineHit:
    """A baseline HIT's assignment, its judgement rows and the assignment's new state."""

    assignment_id: int
    rows: list[tuple]
    status: str
    passed: bool


def baseline_assignments_create(hits: list[HitRows], n_clients: int) -> list[int]:
    """Accepted assignments for the baseline HITs, held by `n_clients` workers of their own.

    Made at set-up, so the assignment table has a realistic size (and statistics) when ours
    runs. Their workers have no account: the HTTP clients' own open work stays theirs.
    """
    workers = Worker.objects.bulk_create(
        [
            Worker(source=WorkerSource.SIMULATED, external_id=f"bench-baseline-{c:02d}")
            for c in range(n_clients)
        ]
    )
    deadline = timezone.now() + timedelta(days=1)
    assignments = Assignment.objects.bulk_create(
        [
            Assignment(hit_id=hit.hit_id, worker=workers[n % n_clients], deadline=deadline)
            for n, hit in enumerate(hits)
        ],
        batch_size=5000,
    )
    return [assignment.pk for assignment in assignments]


def baseline_prepare(
    hits: list[HitRows], assignment_ids: list[int], answers: list[list[dict[str, Any]]]
) -> list[BaselineHit]:
    """The rows ours wrote, HIT by HIT, ready to insert for the baseline's assignments.

    Everything the service computes (follow-up masks, golden check, new status) is done
    here, before the clock: the baseline only writes.
    """
    prepared = []
    for assignment_id, hit, hit_answers in zip(assignment_ids, hits, answers, strict=True):
        rows = []
        levels = []
        for item_id, answer in zip(hit.item_ids, hit_answers, strict=True):
            level = Level(answer["level"])
            levels.append(level)
            rows.append(
                (
                    assignment_id,
                    item_id,
                    level.value,
                    shortcomings_to_mask(answer["shortcomings"]),
                    wrong_concepts_to_mask(answer["wrong_concepts"]),
                    answer["other_text"],
                    answer["elapsed_ms"],
                )
            )
        passed = golden_check(
            (role, position, level)
            for position, (role, level) in enumerate(zip(hit.roles, levels, strict=True))
        ).passed
        # approve_or_flag: passed work is approved, the rest waits flagged for a person.
        status = "approved" if passed else "submitted"
        prepared.append(BaselineHit(assignment_id, rows, status, passed))
    return prepared


def baseline_reset(work: list[BaselineHit]) -> None:
    """Undo a baseline run (not timed): delete its judgements, reopen its assignments."""
    ids = [hit.assignment_id for hit in work]
    with connection.cursor() as cursor:
        cursor.execute(
            f"DELETE FROM {Judgement._meta.db_table} WHERE assignment_id = ANY(%s)", [ids]
        )
        cursor.execute(
            f"UPDATE {Assignment._meta.db_table} SET status = 'accepted', submitted_at = NULL, "
            "golden_passed = NULL, reviewed_at = NULL, flagged = false WHERE id = ANY(%s)",
            [ids],
        )
        # Outside a transaction (autocommit): the next run starts without dead rows.
        cursor.execute(f"VACUUM {Judgement._meta.db_table}, {Assignment._meta.db_table}")


def baseline_run(work: list[BaselineHit], n_clients: int) -> tuple[float, list[float]]:
    """The same clients write the same HITs straight into PostgreSQL, one transaction each.

    Clients take HITs from one shared queue until it is empty. Returns (wall seconds,
    per-HIT transaction milliseconds).
    """
    judgement_table = Judgement._meta.db_table
    assignment_table = Assignment._meta.db_table
    insert = (
        f"INSERT INTO {judgement_table} (assignment_id, item_id, level, shortcomings, "
        "wrong_concepts, other_text, elapsed_ms, created_at) VALUES %s"
    )
    template = "(%s, %s, %s, %s, %s, %s, %s, now())"
    update = (
        f"UPDATE {assignment_table} SET status = %s, submitted_at = now(), golden_passed = %s, "
        "reviewed_at = CASE WHEN %s THEN now() END, flagged = %s, feedback = '' WHERE id = %s"
    )
    queue = deque(work)
    lock = threading.Lock()
    latencies: list[list[float]] = [[] for _ in range(n_clients)]
    errors: list[BaseException] = []
    window: dict[str, float] = {}
    ready = threading.Barrier(
        n_clients + 1, action=lambda: window.__setitem__("start", time.perf_counter())
    )
    finished = [0.0] * n_clients

    def run(c: int) -> None:
        conn = psycopg2.connect(DATABASE_URL)
        try:
            ready.wait()
            while True:
                with lock:
                    if not queue or errors:
                        break
                    hit = queue.popleft()
                start = time.perf_counter()
                with conn, conn.cursor() as cursor:  # one transaction, committed on exit
                    execute_values(cursor, insert, hit.rows, template=template)
                    approved = hit.status == "approved"
                    cursor.execute(
                        update,
                        (hit.status, hit.passed, approved, not hit.passed, hit.assignment_id),
                    )
                latencies[c].append((time.perf_counter() - start) * 1000)
        except BaseException as exc:
            errors.append(exc)
            ready.abort()
        finally:
            finished[c] = time.perf_counter()
            conn.close()

    threads_run(n_clients, run, ready)
    if errors:
        raise BenchError(f"a baseline client failed: {errors[0]!r}") from errors[0]
    return max(finished) - window["start"], [ms for mine in latencies for ms in mine]


# --------------------------------------------------------------------------- queries


def queries_show() -> None:
    """Print the SQL of one more next + submit, run in this process by Django's test client."""
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    settings.ALLOWED_HOSTS = ["testserver"]
    client = Client()
    client.force_login(get_user_model().objects.get(username="bench00"))
    with CaptureQueriesContext(connection) as captured:
        response = client.post("/api/assignments/next/")
    _queries_print("next", response.status_code, captured.captured_queries)
    if response.status_code != 200:
        return
    page = response.json()
    answers = answers_make(random.Random(0), [item["id"] for item in page["items"]])
    with CaptureQueriesContext(connection) as captured:
        response = client.post(
            page["submit_url"],
            data=json.dumps({"answers": answers}),
            content_type="application/json",
        )
    _queries_print("submit", response.status_code, captured.captured_queries)


def _queries_print(label: str, status: int, queries: list[dict[str, str]]) -> None:
    total_ms = sum(float(q["time"]) for q in queries) * 1000
    print(
        f"  {label}: HTTP {status}, {len(queries)} queries, {total_ms:.1f} ms in the database "
        "(as timed by Django)"
    )
    for query in queries:
        print(f"    {float(query['time']) * 1000:6.1f} ms  {query['sql'][:160]}")


# --------------------------------------------------------------------------- report


def percentile(values: list[float], pct: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[pct - 1]


def benchmark(args: argparse.Namespace) -> dict[str, Any]:
    n_clients, seconds, n_hits = args.clients, args.seconds, args.hits

    print("set-up (not timed):", flush=True)
    start = time.perf_counter()
    database_recreate()
    call_command("migrate", verbosity=0)
    print(f"  database {DB_NAME}, migrated: {time.perf_counter() - start:.1f} s", flush=True)
    start = time.perf_counter()
    dataset, image_pks, caption_pks = dataset_create(
        name="bench-submit",
        description="submit benchmark",
        n_images=N_IMAGES,
        captions_per_image=CAPTIONS_PER_IMAGE,
        caption_text="a caption ({j}) written for image {n}",
    )
    batch_with_hits(dataset, image_pks, caption_pks, "bench ours", n_hits, BatchState.ANNOTATING)
    workers_create(n_clients)
    # The baseline's HITs, with their accepted assignments, in a batch that is no longer
    # annotating (ours' next-HIT query does not see it).
    base_hits = batch_with_hits(
        dataset, image_pks, caption_pks, "bench baseline", n_hits, BatchState.AGGREGATING
    )
    base_assignments = baseline_assignments_create(base_hits, n_clients)
    with connection.cursor() as cursor:
        # Statistics, as autovacuum gathers them on a live database. Taken while the
        # assignment table is empty, they make the planner read the whole table once per
        # HIT in the next-HIT query; never taken, they leave it guessing.
        cursor.execute("ANALYZE")
    print(
        f"  {N_IMAGES} images, {len(caption_pks):,} captions, {n_hits:,} HITs of "
        f"{ITEMS_PER_HIT} pairs for ours and {n_hits:,} with accepted assignments for the "
        f"baseline, {n_clients} accounts: {time.perf_counter() - start:.1f} s",
        flush=True,
    )

    with tempfile.TemporaryFile(prefix="bench-submit-gunicorn-") as log:
        server = Gunicorn(workers=args.workers, threads=args.threads, log=log)
        try:
            server.wait_healthy()
            print(
                f"  gunicorn config.wsgi, {args.workers} workers on port {server.port}; "
                f"logging in {n_clients} clients, one warm-up HIT each",
                flush=True,
            )
            load = os.getloadavg()[0]
            worker_pids = server.worker_pids()
            stats, elapsed, cpu_server, cpu_here = clients_run(
                server.port,
                n_clients,
                seconds,
                lambda: cpu_seconds(worker_pids),
                take_next=args.take_next,
            )
        except BenchError:
            print(f"gunicorn's log (last lines):\n{server.tail()}", flush=True)
            raise
        finally:
            server.stop()

    hits_done = sum(mine.hits for mine in stats)
    if hits_done == 0:
        raise BenchError("no HIT was submitted in the timed window")
    ran_out = any(mine.ran_out for mine in stats)
    submit_ms = [ms for mine in stats for ms in mine.submit_ms]
    next_ms = [ms for mine in stats for ms in mine.next_ms]
    stored = Judgement.objects.filter(assignment__hit__batch__name="bench ours").count()
    expected = (hits_done + n_clients) * ITEMS_PER_HIT  # timed HITs + one warm-up each
    if stored != expected:
        raise BenchError(f"{stored} judgements stored, expected {expected}")
    ours_rate = hits_done * ITEMS_PER_HIT / elapsed
    print(
        f"ours (HTTP, {n_clients} clients, load average {load:.1f} before):\n"
        f"  {hits_done:,} HITs = {hits_done * ITEMS_PER_HIT:,} judgements in {elapsed:.1f} s: "
        f"{ours_rate:.0f} judgements/s ({hits_done / elapsed:.1f} HITs/s)\n"
        f"  submit latency p50 {percentile(submit_ms, 50):.1f} ms, "
        f"p95 {percentile(submit_ms, 95):.1f} ms, max {max(submit_ms):.1f} ms\n"
        + (
            "  next HIT: handed out by the submit request (take_next)\n"
            if args.take_next
            else f"  next latency   p50 {percentile(next_ms, 50):.1f} ms, "
            f"p95 {percentile(next_ms, 95):.1f} ms\n"
        )
        + f"  CPU per HIT: gunicorn workers {cpu_server / hits_done * 1000:.1f} ms, "
        f"clients (this process) {cpu_here / hits_done * 1000:.1f} ms",
        flush=True,
    )
    if ran_out:
        print(f"  WARNING: the {n_hits:,} HITs ran out before the end; raise --hits", flush=True)

    if args.queries:
        print("SQL of one more next + submit (in this process, DEBUG query capture):")
        queries_show()

    # Baseline: the same judgements (ours' answers, HIT by HIT) on a second set of HITs.
    answers = [hit for mine in stats for hit in mine.submitted]
    work = baseline_prepare(base_hits[:hits_done], base_assignments[:hits_done], answers)
    print(
        f"baseline (psycopg2, one transaction per HIT, same {n_clients} clients), "
        f"{args.baseline_repeats} runs:",
        flush=True,
    )
    runs: list[tuple[float, list[float]]] = []
    for run in range(args.baseline_repeats):
        if run:
            baseline_reset(work)
        connection.close()  # the baseline's clients hold their own connections
        base_elapsed, base_ms = baseline_run(work, n_clients)
        stored = Judgement.objects.filter(assignment_id__in=[w.assignment_id for w in work]).count()
        if stored != hits_done * ITEMS_PER_HIT:
            raise BenchError(f"baseline stored {stored} judgements, expected {hits_done * 18}")
        runs.append((base_elapsed, base_ms))
        print(
            f"  run {run + 1}: the same {hits_done * ITEMS_PER_HIT:,} judgements in "
            f"{base_elapsed:.2f} s: {hits_done * ITEMS_PER_HIT / base_elapsed:.0f} judgements/s; "
            f"per-HIT transaction p50 {percentile(base_ms, 50):.1f} ms, "
            f"p95 {percentile(base_ms, 95):.1f} ms",
            flush=True,
        )
    base_elapsed = statistics.median(elapsed for elapsed, _ in runs)
    base_rate = hits_done * ITEMS_PER_HIT / base_elapsed
    print(f"  median: {base_rate:.0f} judgements/s", flush=True)
    return {
        "ours_rate": ours_rate,
        "base_rate": base_rate,
        "p50": percentile(submit_ms, 50),
        "p95": percentile(submit_ms, 95),
        "protocol": "take_next" if args.take_next else "separate_next",
        "elapsed": elapsed,
        "hits": hits_done,
        "ran_out": ran_out,
    }


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60, help="timed window (default 60)")
    parser.add_argument("--clients", type=int, default=16, help="concurrent clients (default 16)")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers (default 2)")
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="threads per gunicorn worker (default 1: sync workers; more overlap database waits)",
    )
    parser.add_argument(
        "--hits",
        type=int,
        default=DEFAULT_HITS,
        help=f"HITs in the annotating batch that ours works on (default {DEFAULT_HITS:,})",
    )
    parser.add_argument(
        "--baseline-repeats",
        type=int,
        default=3,
        help="baseline runs over the same HITs; the median counts (default 3)",
    )
    parser.add_argument(
        "--take-next",
        action="store_true",
        help="let each submit hand out the next HIT too (one request per HIT)",
    )
    parser.add_argument(
        "--queries", action="store_true", help="also print the SQL of one next + submit"
    )
    parser.add_argument(
        "--keep-db", action="store_true", help=f"leave the database {DB_NAME} for inspection"
    )
    args = parser.parse_args()
    if min(args.seconds, args.clients, args.workers, args.baseline_repeats) <= 0:
        parser.error("--seconds, --clients, --workers and --baseline-repeats must be positive")
    if args.hits < 2 * args.clients:
        parser.error(f"--hits must be at least 2 x --clients ({2 * args.clients})")

    # SIGTERM runs the clean-up too (gunicorn stopped, database dropped), like Ctrl-C.
    signal.signal(signal.SIGTERM, _interrupt)
    # Like the test runner: no query log in this process while it bulk-inserts.
    settings.DEBUG = False
    print(f"submit benchmark: {DATABASE_URL}", flush=True)
    try:
        result = benchmark(args)
    except BenchError as exc:
        sys.exit(f"bench_submit: {exc}")
    except KeyboardInterrupt:
        sys.exit("bench_submit: interrupted (gunicorn was stopped)")
    finally:
        if not args.keep_db:
            database_drop()

    ratio = result["base_rate"] / result["ours_rate"]
    print(
        f"ratio {ratio:.2f} (baseline / ours judgements per second; target <= {TARGET_RATIO}); "
        f"submit p95 {result['p95']:.1f} ms (target <= {P95_TARGET_MS:.0f})"
    )
    report_line(
        "submit",
        round(ratio, 3),
        TARGET_RATIO,
        "lower",
        judgements_per_s=round(result["ours_rate"], 1),
        baseline_judgements_per_s=round(result["base_rate"], 1),
        p50_ms=round(result["p50"], 1),
        p95_ms=round(result["p95"], 1),
        p95_target_ms=P95_TARGET_MS,
        clients=args.clients,
        protocol=result["protocol"],
        seconds=round(result["elapsed"], 1),
        hits=result["hits"],
        ran_out_of_hits=result["ran_out"],
        database="postgresql",
    )


if __name__ == "__main__":
    main()
