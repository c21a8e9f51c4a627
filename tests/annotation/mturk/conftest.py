"""Fixtures of the MTurk tests: the real boto3 client behind botocore's Stubber, and no
default client, so nothing here reaches the network."""

from __future__ import annotations

import boto3
import pytest
from botocore.stub import Stubber

from annotation.mturk.protocol import SANDBOX_ENDPOINT

from .helpers import (
    BASE,
)


def no_default_client(**kwargs):
    pytest.fail("a service made its own MTurk client: pass the stubbed one (client=)")


@pytest.fixture(autouse=True)
def _mturk_settings(settings, monkeypatch):
    settings.MTURK_EXTERNAL_BASE_URL = BASE
    monkeypatch.setattr("annotation.mturk.client.RETRY_BASE_SECONDS", 0)  # retries without waiting
    monkeypatch.setattr(
        "annotation.mturk.client.mturk_client", no_default_client
    )  # never the network


@pytest.fixture
def client():
    return boto3.client(
        "mturk",
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        endpoint_url=SANDBOX_ENDPOINT,
    )


@pytest.fixture
def stub(client):
    with Stubber(client) as stubber:
        yield stubber
