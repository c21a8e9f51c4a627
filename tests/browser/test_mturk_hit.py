"""The HIT page as MTurk shows it: inside an iframe of another site, in preview and after
accepting, and the hand-over to `turkSubmitTo` once the judgements are stored.

A tiny HTTP server plays MTurk: it serves the page that frames the HIT and records what
the browser posts to its `/mturk/externalSubmit`.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlencode

import pytest

from annotation.models import HIT, Assignment, HITItem, Judgement
from annotation.mturk.links import hit_page_path
from annotation.mturk.protocol import PREVIEW_ASSIGNMENT_ID
from tests.mturk_published import published_on_sandbox

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


class FakeMTurk(ThreadingHTTPServer):
    """Frames `frame_src` at / and records the posts to /mturk/externalSubmit."""

    frame_src = ""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.submissions: list[dict[str, str]] = []

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: FakeMTurk

    def do_GET(self) -> None:
        body = (
            "<!doctype html><title>Fake MTurk</title><h1>Fake MTurk</h1>"
            f'<iframe id="mturk" src="{self.server.frame_src}" '
            'style="width:100%;height:720px;border:1px solid #999"></iframe>'
        )
        self._answer(body)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", 0))
        fields = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
        self.server.submissions.append({**fields, "path": self.path, "at": time.time()})
        self._answer("<!doctype html><p id='done'>Fake MTurk: HIT submitted.</p>")

    def _answer(self, body: str) -> None:
        data = body.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:  # keep the test output clean
        pass


@pytest.fixture
def fake_mturk(settings):
    server = FakeMTurk()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    settings.MTURK_ALLOWED_SUBMIT_HOSTS = [server.origin]
    yield server
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


@pytest.fixture
def published(annotating_batch):
    return published_on_sandbox(annotating_batch).hits.order_by("index").first()


def frame_refused(page, seconds: float = 10.0) -> bool:
    """Wait until Chromium swaps the frame for its error page (it may lag the load event)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if len(page.frames) > 1 and page.frames[1].url.startswith("chrome-error://"):
            return True
        page.wait_for_timeout(100)
    return False


def close_instructions(frame) -> None:
    """Close the instructions that open by themselves (a preview, a worker's first HIT)."""
    frame.locator("#instructions[data-state=open]").wait_for(state="attached")
    frame.locator("#instructions [data-close]").first.click()
    frame.locator("#instructions[data-state=closed]").wait_for(state="attached")


def frame_src(live_server, hit: HIT, **params: str) -> str:
    query = urlencode({"hitId": hit.external_id, **params})
    return f"{live_server.url}{hit_page_path(hit)}?{query}"


def test_the_preview_is_framed_by_mturk_only_and_cannot_be_answered(
    new_page, live_server, fake_mturk, published, settings, screenshots_dir
):
    fake_mturk.frame_src = frame_src(live_server, published, assignmentId=PREVIEW_ASSIGNMENT_ID)
    settings.MTURK_ALLOWED_SUBMIT_HOSTS = []  # this origin is not MTurk: no frame
    page = new_page()
    page.goto(fake_mturk.origin + "/", wait_until="load")
    assert frame_refused(page)  # by frame-ancestors
    assert page.frame_locator("#mturk").locator(".pair").count() == 0

    settings.MTURK_ALLOWED_SUBMIT_HOSTS = [fake_mturk.origin]
    page.goto(fake_mturk.origin + "/", wait_until="load")
    frame = page.frame_locator("#mturk")
    frame.locator("#mturk-preview").wait_for()
    close_instructions(frame)
    frame.locator(".caption").first.click()  # focus inside the frame
    page.keyboard.press("1")
    radios = frame.locator(".pair:not([hidden]) input[type=radio]")
    assert radios.count() == 4
    assert all(radios.nth(n).is_disabled() for n in range(4))
    assert frame.locator("input[type=radio]:checked").count() == 0
    assert frame.locator("#submit").is_disabled()
    page.keyboard.press("ArrowRight")  # looking through the pairs still works
    frame.locator("#progress-text").get_by_text("2 / ").wait_for()
    page.keyboard.press("Enter")
    frame.locator("#progress-text").get_by_text("3 / ").wait_for()
    assert frame.locator(".pair-error").all_inner_texts() == [""] * published.items.count()
    page.screenshot(path=screenshots_dir / "mturk_preview.png")
    assert not Assignment.objects.exists()


def test_an_accepted_hit_is_stored_then_handed_to_turk_submit_to(
    new_page, live_server, fake_mturk, published, screenshots_dir
):
    fake_mturk.frame_src = frame_src(
        live_server,
        published,
        assignmentId="3ASGBROWSER1",
        workerId="A1BROWSER",
        turkSubmitTo=fake_mturk.origin,
    )
    page = new_page()
    page.goto(fake_mturk.origin + "/")
    frame = page.frame_locator("#mturk")
    close_instructions(frame)  # the worker's first HIT here
    frame.locator(".pair:not([hidden]) .caption").click()  # focus inside the frame
    items = list(HITItem.objects.filter(hit=published).order_by("position"))
    for index, item in enumerate(items):
        page.keyboard.press("4" if item.role == "golden_tn" else "1")
        if index == 0:
            page.screenshot(path=screenshots_dir / "mturk_accepted.png")
        if index + 1 < len(items):
            frame.locator("#progress-text").get_by_text(f"{index + 2} / ").wait_for()
    frame.locator("#submit:focus").wait_for()
    page.keyboard.press("Enter")
    frame.locator("#done").wait_for()  # the frame now shows (fake) MTurk's answer

    (posted,) = fake_mturk.submissions
    assignment = Assignment.objects.get(external_id="3ASGBROWSER1")
    assert posted["path"] == "/mturk/externalSubmit"
    assert posted["assignmentId"] == "3ASGBROWSER1"
    assert posted["judgements"] == str(len(items))
    assert posted["platform_assignment"] == str(assignment.pk)
    assert posted["status"] == "submitted" == assignment.status  # approved by the sync, later
    stored = Judgement.objects.filter(assignment=assignment)
    assert stored.count() == len(items)
    assert all(j.elapsed_ms > 0 for j in stored)
    # The platform had the judgements before MTurk heard of the assignment.
    posted_at = datetime.fromtimestamp(posted["at"], tz=UTC)
    assert max(j.created_at for j in stored) <= posted_at
