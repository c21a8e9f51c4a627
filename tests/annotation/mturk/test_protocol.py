"""What MTurk expects: the ExternalQuestion, the base URL, turkSubmitTo and request tokens."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from annotation.mturk.errors import MTurkInputError
from annotation.mturk.protocol import (
    EXTERNAL_QUESTION_NS,
    SUBMIT_HOSTS,
    TOKEN_MAX,
    external_base_url,
    external_question_xml,
    request_token,
    submit_url,
)


def test_the_external_question_frames_the_url_at_full_height():
    url = "https://mitl.example.org/mturk/hits/7/abc/?a=1&b=2"
    xml = external_question_xml(url)
    root = ET.fromstring(xml)
    ns = {"q": EXTERNAL_QUESTION_NS}
    assert root.tag == f"{{{EXTERNAL_QUESTION_NS}}}ExternalQuestion"
    assert root.find("q:ExternalURL", ns).text == url  # & escaped in the XML, intact once read
    assert root.find("q:FrameHeight", ns).text == "0"
    assert "&amp;" in xml


def test_the_base_url_is_required_and_https_for_production():
    with pytest.raises(MTurkInputError, match="set MTURK_EXTERNAL_BASE_URL"):
        external_base_url("", production=False)
    with pytest.raises(MTurkInputError, match="production HITs need an HTTPS base URL"):
        external_base_url("http://mitl.example.org", production=True)
    with pytest.raises(MTurkInputError, match="must look like"):
        external_base_url("mitl.example.org", production=False)
    assert external_base_url("http://tunnel.test/", production=False) == "http://tunnel.test"
    assert (
        external_base_url(" https://mitl.example.org/app/ ", production=True)
        == "https://mitl.example.org/app"
    )


@pytest.mark.parametrize(
    ("turk_submit_to", "expected"),
    [
        ("https://www.mturk.com", "https://www.mturk.com/mturk/externalSubmit"),
        (
            "https://workersandbox.mturk.com/",
            "https://workersandbox.mturk.com/mturk/externalSubmit",
        ),
        ("http://127.0.0.1:8765", "http://127.0.0.1:8765/mturk/externalSubmit"),  # allowed here
    ],
)
def test_turk_submit_to_from_an_allowed_host_gives_the_external_submit_url(
    turk_submit_to, expected
):
    allowed = (*SUBMIT_HOSTS, "http://127.0.0.1:8765")
    assert submit_url(turk_submit_to, allowed=allowed) == expected


@pytest.mark.parametrize(
    "turk_submit_to",
    [
        "",
        "https://www.mturk.com.evil.example",
        "http://www.mturk.com",  # not HTTPS
        "https://evil.example/?next=https://www.mturk.com",
        "https://www.mturk.com/somewhere/else",
        "javascript:alert(1)",
        "http://127.0.0.1:8765",  # a stand-in that is not configured
    ],
)
def test_turk_submit_to_elsewhere_is_refused(turk_submit_to):
    with pytest.raises(MTurkInputError, match="is not one of MTurk's sites"):
        submit_url(turk_submit_to, allowed=SUBMIT_HOSTS)


def test_request_tokens_stay_within_mturks_limit():
    assert request_token("mitl", "sandbox", 12, 3456) == "mitl-sandbox-12-3456"
    assert len(request_token("mitl-replace", "3" * 50)) <= TOKEN_MAX
    with pytest.raises(MTurkInputError, match="longer than 64"):
        request_token("x" * 65)
