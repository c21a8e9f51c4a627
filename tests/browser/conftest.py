"""Playwright driving Debian's Chromium against pytest-django's live server.

Screenshots land in var/screenshots/ on every run. Without Chromium the tests skip, unless
REQUIRE_SERVICES=1 (CI), where a missing browser is a failure.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings

# Debian's Chromium; CHROMIUM_PATH names another Chromium-based browser (hosted CI's Chrome).
CHROMIUM = Path(os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
]
WIDE = {"width": 1280, "height": 800}
NARROW = {"width": 420, "height": 860}


@pytest.fixture(scope="session")
def screenshots_dir() -> Path:
    folder = settings.BASE_DIR / "var" / "screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="session")
def chromium() -> Iterator:
    if not CHROMIUM.exists():
        message = f"{CHROMIUM} is missing: apt-get install -y chromium"
        if os.environ.get("REQUIRE_SERVICES") == "1":
            pytest.fail(message)
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    # Playwright's sync API runs an event loop in this thread; the ORM calls made by the
    # test itself between browser steps are still plain synchronous code.
    os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
        )
        yield browser
        browser.close()


@pytest.fixture
def new_page(chromium, live_server):
    """Open pages in fresh browser contexts (separate cookies), closed after the test."""
    contexts = []

    def open_page(viewport: dict = WIDE):
        context = chromium.new_context(viewport=viewport, base_url=live_server.url)
        context.set_default_timeout(15_000)
        contexts.append(context)
        return context.new_page()

    yield open_page
    for context in contexts:
        context.close()
