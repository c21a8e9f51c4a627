"""Contract test: every operation answers as the OpenAPI schema says (schemathesis).

The schema is loaded from the app in-process (WSGI, the test database) with a staff token, so
protected operations run for real against the small dataset and its annotating batch.
Generation is bounded and deterministic: the same cases on every run, positive and negative,
with all of schemathesis's checks.
"""

from __future__ import annotations

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from rest_framework.authtoken.models import Token
from schemathesis.config import SchemathesisConfig

from config.wsgi import application

# Writes check what a schema cannot say: that a named dataset exists, that a config's keys
# make a batch, that uploaded files parse, that a batch or assignment is in the right state.
# Such a refusal is a 400 in the one error format, so schema-valid writes may get one; the
# token endpoint is rate-limited (a documented 429) and its attempts exceed the limit.
CONFIG = """
[generation]
max-examples = 12
deterministic = true
mode = "all"

[[operations]]
include-method-regex = "^(POST|PUT|PATCH)$"
checks.positive_data_acceptance.expected-statuses = [
    "2xx", "400", "401", "403", "404", "409", "429",
]
"""


@pytest.fixture
def _test_transaction_kept():
    """Keep the test's database connection open across WSGI requests, as Django's test client
    does: Django's handler closes it after each request, which would end the test transaction
    on PostgreSQL."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def api_schema(_test_transaction_kept, annotating_batch, staff_user):
    token = Token.objects.create(user=staff_user)
    headers = {"Authorization": f"Token {token.key}"}
    config = SchemathesisConfig.from_str(CONFIG)
    schema = schemathesis.openapi.from_wsgi(
        "/api/schema/?format=json", application, config=config, headers=headers
    )
    schema.config.update(headers=headers)
    return schema


schema = schemathesis.pytest.from_fixture("api_schema")


@schema.parametrize()
@settings(
    max_examples=12,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
def test_the_api_keeps_its_contract(case):
    case.call_and_validate()
