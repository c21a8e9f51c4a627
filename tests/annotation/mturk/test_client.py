"""Every MTurk call: retried on throttling and server faults, credentials never shown."""

from __future__ import annotations

import json
import logging

import boto3
import botocore.session
import pytest
from botocore.credentials import CredentialResolver
from botocore.stub import Stubber

from annotation.models import Batch
from annotation.mturk.client import RETRY_TRIES, mturk_client
from annotation.mturk.errors import MTurkError
from annotation.mturk.protocol import SANDBOX_ENDPOINT
from annotation.mturk.publish import mturk_publish

from .helpers import (
    expect_create_hit,
    expect_hit_type,
    hits_of,
)

pytestmark = pytest.mark.django_db


REAL_CLIENT = mturk_client


def test_throttling_and_unavailability_are_retried(annotating_batch, client, stub):
    stub.add_client_error("create_hit_type", "ThrottlingException", "Rate exceeded")
    stub.add_client_error(
        "create_hit_type", "ServiceUnavailable", "Try again", http_status_code=503
    )
    expect_hit_type(stub)
    for hit in hits_of(annotating_batch):
        expect_create_hit(stub, annotating_batch, hit)
    result = mturk_publish(batch=annotating_batch, client=client)
    stub.assert_no_pending_responses()
    assert result.created == len(hits_of(annotating_batch))


def test_credentials_never_reach_logs_errors_or_the_database(annotating_batch, monkeypatch, caplog):
    secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzSECRETKEY"
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAIOSFODNN7EXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
    client = REAL_CLIENT(production=False)  # boto3's default chain
    assert client._request_signer._credentials.secret_key == secret  # the test means it
    caplog.set_level(logging.DEBUG)
    with Stubber(client) as stub:
        for _ in range(RETRY_TRIES):
            stub.add_client_error("create_hit_type", "ServiceFault", "Internal", 500)
        with pytest.raises(MTurkError) as refusal:
            mturk_publish(batch=annotating_batch, client=client)
    assert "ServiceFault" in str(refusal.value)
    assert secret not in str(refusal.value)
    assert secret not in caplog.text
    assert "retrying" in caplog.text  # the log did record the publish
    assert secret not in json.dumps(Batch.objects.get(pk=annotating_batch.pk).mturk)


def test_missing_credentials_are_explained(annotating_batch):
    session = botocore.session.Session()
    session.register_component("credential_provider", CredentialResolver(providers=[]))
    client = boto3.Session(botocore_session=session).client(
        "mturk", region_name="us-east-1", endpoint_url=SANDBOX_ENDPOINT
    )
    with pytest.raises(MTurkError, match="no AWS credentials for MTurk: set AWS_ACCESS_KEY_ID"):
        mturk_publish(batch=annotating_batch, client=client)
