"""The submit benchmark's HTTP side: logged-in clients that take and submit whole HITs.

Each client is one browser (its cookies and CSRF token) looping over next + submit with
a whole HIT's answers, drawn as a person's would be; `clients_run` times them together.
"""

from __future__ import annotations

import http.client
import json
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import urlencode

from common import threads_run
from submit_fixture import ITEMS_PER_HIT, PASSWORD, BenchError

from mitl.judgements import Level

# The answers' mix: mostly sure answers, and middle answers with valid follow-ups.
LEVEL_WEIGHTS = {Level.YES: 0.35, Level.WEAK_YES: 0.15, Level.WEAK_NO: 0.15, Level.NO: 0.35}
FOLLOWUPS = {
    Level.WEAK_YES: {"shortcomings": ["misses_main_concept"], "wrong_concepts": []},
    Level.WEAK_NO: {"shortcomings": ["wrong_description"], "wrong_concepts": ["color"]},
}


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
    # The assignment each of them answered, to check what the server stored.
    assignment_ids: list[int] = field(default_factory=list)
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
                assignment_id = page["id"]
                next_ms, submit_ms, answers, page = hit_work(client, rng, page, take_next)
                mine.assignment_ids.append(assignment_id)
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
