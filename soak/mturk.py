"""The public MTurk HIT page under a forged flood, while genuine MTurk workers do their HITs.

A batch is published (`mturk_publish`) to the MTurk stand-in (`mturk_standin`), whose
HITs frame the platform's HIT page as MTurk would. Genuine workers accept a HIT on the
stand-in, open its page through gunicorn with MTurk's query string, submit their answers,
then submit on the stand-in (MTurk's externalSubmit). Meanwhile forged clients, from a few
client addresses (X-Forwarded-For, behind NUM_PROXIES=1), open the same pages with
made-up (assignmentId, workerId) pairs and submit answers as fast as they can. Then the
page's verification (as it would run once the work is old enough) and the sync run
in-process against the stand-in, and `mturk_checks` compares the database with what each
side was told.

Pacing: genuine worker k starts once the background load has gone k/G of its way, so the
genuine work is spread over the flood. On its own the background is the flood itself;
alongside the `submissions` part (kills, Redis and PostgreSQL outages) it is that part's
share of HITs handed out, and the flood is spread over it too.
"""

from __future__ import annotations

import html
import random
import re
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlencode, urlsplit

from .client import DROPPED, exchange
from .mturk_standin import MTurkStandIn, RequestError, mturk_id

TURK_SUBMIT_TO = "https://workersandbox.mturk.com"
MAX_ASSIGNMENTS = 2  # genuine workers per HIT: MTurk hands out no more
NEW_ASSIGNMENT_RATE = "20/hour"  # MTURK_NEW_ASSIGNMENT_RATE_PER_IP for the run
# A genuine worker's patience: longer than any outage the run causes (dropped connections,
# 503s) and, for a HIT whose unverified pool is full (429), a few minutes of the assignment's
# time on MTurk: a flood from a few addresses holds a HIT until their allowances run out
# (the Redis restart gives them a second one) and the page has asked MTurk about its work.
RETRY_FOR_S = 90.0
BUSY_PATIENCE_S = 300.0
RETRY_PAUSE_S = 0.2
FORGED_THREADS_PER_ADDRESS = 2
_SUBMIT_URL = re.compile(r'data-submit-url="([^"]+)"')
_PAIR = re.compile(r'data-item="(\d+)"')
_NOTICE = re.compile(r'id="mturk-notice"[^>]*>([^<]*)<')


def mturk_env(standin: MTurkStandIn, web_port: int) -> dict[str, str]:
    """The stack's environment for this part: MTurk is the stand-in, clients are behind one
    proxy (X-Forwarded-For names them), and new MTurk assignments are limited per client."""
    return {
        "MTURK_ENDPOINT_URL": standin.url,
        "MTURK_EXTERNAL_BASE_URL": f"http://127.0.0.1:{web_port}",
        "AWS_ACCESS_KEY_ID": "SOAKSTANDINKEY",
        "AWS_SECRET_ACCESS_KEY": "soak-stand-in-secret",
        "NUM_PROXIES": "1",
        "MTURK_NEW_ASSIGNMENT_RATE_PER_IP": NEW_ASSIGNMENT_RATE,
    }


@dataclass
class GenuineWork:
    """One genuine worker's MTurk assignment and the answers the platform confirmed (2xx)."""

    hit_id: str  # MTurk's HITId
    worker_id: str
    assignment_id: str
    answers: list[dict] | None = None  # set once the submit was answered 2xx


@dataclass
class FloodStats:
    """What both sides saw, by side, call and status."""

    statuses: Counter = field(default_factory=Counter)
    genuine: list[GenuineWork] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)  # genuine calls finally non-2xx
    longest_busy_wait_s: float = 0.0  # a genuine call's time spent on 429s
    forged_attempts: int = 0
    seconds: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def saw(self, side: str, call: str, status: int) -> None:
        with self.lock:
            self.statuses[f"{side} {call} {status or 'dropped'}"] += 1


@dataclass
class Page:
    """What a HIT page answered: its status, submit URL and pair numbers (if it has them)."""

    status: int
    submit_url: str = ""
    numbers: list[int] = field(default_factory=list)
    notice: str = ""
    retry_after: float = 0.0


class MTurkFlood:
    """The part's batch on the stand-in, its load (`load`) and, after it, `mturk_checks`."""

    def __init__(
        self,
        stack,
        standin: MTurkStandIn,
        *,
        genuine: int,
        forged: int,
        forged_addresses: int,
        forged_hits: int,
    ) -> None:
        self.stack = stack
        self.standin = standin
        self.genuine = genuine
        self.forged = forged
        self.forged_addresses = max(1, forged_addresses)
        self.forged_hits = forged_hits
        self.batch_id = 0
        self.hit_ids: list[str] = []  # MTurk's HITIds, in the batch's order
        self.stats = FloodStats()

    def prepare(self) -> None:
        """A batch taking answers, published to the stand-in as an admin would publish it."""
        from annotation.models import HIT, Batch
        from annotation.mturk.publish import mturk_publish

        from .world import annotating_batch

        n_hits = max(1, -(-self.genuine // MAX_ASSIGNMENTS))
        self.batch_id = annotating_batch(
            "soak mturk", n_hits=n_hits, max_assignments=MAX_ASSIGNMENTS
        )
        # Through MTURK_ENDPOINT_URL and MTURK_EXTERNAL_BASE_URL, as the admin page would.
        mturk_publish(batch=Batch.objects.get(pk=self.batch_id), production=False)
        self.hit_ids = list(
            HIT.objects.filter(batch_id=self.batch_id)
            .order_by("index")
            .values_list("external_id", flat=True)
        )

    def load(self, background: Callable[[], float] | None = None) -> None:
        """Run the genuine workers and the flood together (see the module's docstring)."""
        made = [0]

        def flood_share() -> float:
            return made[0] / self.forged if self.forged else 1.0

        share = background or flood_share
        tickets = threading.Lock()

        def forged_ticket() -> int | None:
            with tickets:
                if made[0] >= self.forged:
                    return None
                made[0] += 1
                return made[0] - 1

        targets = self.hit_ids[: self.forged_hits] if self.forged_hits else self.hit_ids
        forged = [
            threading.Thread(
                target=self._forged_client,
                args=(f"10.66.0.{n % self.forged_addresses + 1}", targets, n, forged_ticket),
                kwargs={"paced_by": background},
            )
            for n in range(self.forged_addresses * FORGED_THREADS_PER_ADDRESS)
        ]
        genuine = [
            threading.Thread(target=self._genuine_worker, args=(k, share))
            for k in range(self.genuine)
        ]
        started = time.monotonic()
        for thread in forged + genuine:
            thread.start()
        for thread in forged + genuine:
            thread.join()
        self.stats.forged_attempts = made[0]
        self.stats.seconds = round(time.monotonic() - started, 1)

    # --- a genuine worker ---------------------------------------------------------------

    def _genuine_worker(self, k: int, share: Callable[[], float]) -> None:
        try:
            self._genuine_work(k, share)
        except Exception as exc:  # never silent: a worker that did not finish is reported
            self._refuse(f"the soak's genuine worker {k} failed: {exc!r}")

    def _genuine_work(self, k: int, share: Callable[[], float]) -> None:
        _wait_for(share, k / max(1, self.genuine))
        hit_id = self.hit_ids[k % len(self.hit_ids)]  # one worker per HIT, then a second
        worker_id = mturk_id("AG")
        address = f"10.1.{k // 250}.{k % 250 + 1}"  # every genuine worker its own address
        try:
            assignment_id = self.standin.accept(hit_id, worker_id)
        except RequestError as exc:
            self._refuse(f"accept on MTurk: {exc}")
            return
        work = GenuineWork(hit_id, worker_id, assignment_id)
        with self.stats.lock:
            self.stats.genuine.append(work)
        page = self._until_answered(
            lambda: self._open(hit_id, worker_id, assignment_id, address), "open"
        )
        if page.status != 200 or not page.submit_url:
            self._refuse(f"open {page.status}: {page.notice or 'no form'} ({assignment_id})")
            return
        answers = _answers(page.numbers, random.Random(k))
        posted = self._until_answered(
            lambda: self._submit(page.submit_url, answers, address), "submit"
        )
        if posted.status not in (200, 201):
            self._refuse(f"submit {posted.status}: {posted.notice} ({assignment_id})")
            return
        work.answers = answers
        self.standin.submit(assignment_id)  # the page then posts to MTurk's externalSubmit

    def _until_answered(self, call: Callable[[], Page], name: str) -> Page:
        """Call until answered other than by a dropped connection, a 503 or a 429 (tried
        again after its Retry-After), or until a genuine worker's patience runs out: 90 s of
        dropped connections and 503s in a row, 5 minutes of busy answers in all."""
        started, busy = time.monotonic(), 0.0
        trouble_since: float | None = None  # the first of the current dropped/503 answers
        while True:
            page = call()
            self.stats.saw("genuine", name, page.status)
            now = time.monotonic()
            if page.status in (DROPPED, 503):
                trouble_since = trouble_since or now
                left = trouble_since + RETRY_FOR_S - now
            else:
                trouble_since = None
                left = started + BUSY_PATIENCE_S - now
            if page.status not in (DROPPED, 503, 429) or left <= 0:
                with self.stats.lock:
                    self.stats.longest_busy_wait_s = max(self.stats.longest_busy_wait_s, busy)
                return page
            pause = page.retry_after if page.status == 429 else RETRY_PAUSE_S
            pause = min(max(pause, RETRY_PAUSE_S), left)
            busy += pause if page.status == 429 else 0.0
            time.sleep(pause)

    def _refuse(self, what: str) -> None:
        with self.stats.lock:
            self.stats.refused.append(what)

    # --- a forged client ----------------------------------------------------------------

    def _forged_client(
        self,
        address: str,
        targets: list[str],
        seed: int,
        ticket: Callable[[], int | None],
        *,
        paced_by: Callable[[], float] | None,
    ) -> None:
        rng = random.Random(1000 + seed)
        while (n := ticket()) is not None:
            if paced_by is not None:
                _wait_for(paced_by, n / max(1, self.forged))
            try:
                self._forged_attempt(rng.choice(targets), address, rng)
            except Exception as exc:  # counted, and the flood goes on (genuine work waits on it)
                with self.stats.lock:
                    self.stats.statuses[f"forged failed {type(exc).__name__}"] += 1

    def _forged_attempt(self, hit_id: str, address: str, rng: random.Random) -> None:
        page = self._open(hit_id, mturk_id("AF"), mturk_id("3F"), address)
        self.stats.saw("forged", "open", page.status)
        if page.status == 200 and page.submit_url:
            posted = self._submit(page.submit_url, _answers(page.numbers, rng), address)
            self.stats.saw("forged", "submit", posted.status)

    # --- the HIT page over HTTP -----------------------------------------------------------

    def _open(self, hit_id: str, worker_id: str, assignment_id: str, address: str) -> Page:
        """Open a HIT's page as MTurk's frame does: its ExternalURL plus MTurk's parameters."""
        url = self.standin.external_url(hit_id)
        query = urlencode(
            {
                "assignmentId": assignment_id,
                "hitId": hit_id,
                "turkSubmitTo": TURK_SUBMIT_TO,
                "workerId": worker_id,
            }
        )
        parts = urlsplit(url)
        path = f"{parts.path}?{parts.query + '&' if parts.query else ''}{query}"
        status, body, headers = exchange(
            self.stack.port, "GET", path, headers={"X-Forwarded-For": address}
        )
        text = body.decode(errors="replace")
        found = _SUBMIT_URL.search(text) if status == 200 else None
        notice = _NOTICE.search(text)
        return Page(
            status=status,
            submit_url=html.unescape(found.group(1)) if found else "",
            numbers=[int(n) for n in _PAIR.findall(text)] if found else [],
            notice=html.unescape(notice.group(1)).strip() if notice else text[:200],
            retry_after=float(headers.get("Retry-After") or 0),
        )

    def _submit(self, submit_url: str, answers: list[dict], address: str) -> Page:
        """Post the answers as the page's script does (JSON, no cookie, no CSRF token)."""
        import json

        status, body, _ = exchange(
            self.stack.port,
            "POST",
            submit_url,
            json.dumps({"answers": answers}).encode(),
            {"Content-Type": "application/json", "X-Forwarded-For": address},
        )
        return Page(status=status, notice=body[:200].decode(errors="replace"))


def _answers(numbers: list[int], rng: random.Random) -> list[dict]:
    """A whole HIT's answers as the page sends them, by the pairs' numbers on the page."""
    from .world import answers_for

    return answers_for({"items": [{"id": n} for n in numbers]}, rng)


def _wait_for(share: Callable[[], float], at: float) -> None:
    """Wait until the background load has gone `at` of its way."""
    while share() < at:
        time.sleep(0.05)
