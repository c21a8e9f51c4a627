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
from drf_spectacular.generators import SchemaGenerator
from hypothesis import HealthCheck, settings
from rest_framework.authtoken.models import Token
from schemathesis.config import SchemathesisConfig

from api.schema import BEYOND_SCHEMA
from config.wsgi import application

# Every check, with schemathesis's own expectations: a schema-valid request is accepted, or
# answered 401/403/404/409/429, which the schema documents (not logged in, not allowed, no
# such object, the object's state, rate-limited). The one exception is a write whose schema
# says it checks more than a schema can state (`x-checks-beyond-schema`, api/schema.py:
# stored names, file contents, rules between values): there a schema-valid request may get
# a 400 in the one error format.
CONFIG = """
[generation]
max-examples = 12
deterministic = true
mode = "all"
"""
ALLOWED_BEYOND_SCHEMA = """
[[operations]]
include-operation-id-regex = "^({operation_ids})$"
checks.positive_data_acceptance.expected-statuses = [
    "2xx", "400", "401", "403", "404", "409", "429",
]
"""


def beyond_schema_operations() -> list[str]:
    """The operations whose schema says they check more than it states (a 400 may come)."""
    spec = SchemaGenerator().get_schema(request=None, public=True)
    return [
        operation["operationId"]
        for operations in spec["paths"].values()
        for operation in operations.values()
        if BEYOND_SCHEMA in operation
    ]


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
    operation_ids = "|".join(beyond_schema_operations())
    config = SchemathesisConfig.from_str(
        CONFIG + ALLOWED_BEYOND_SCHEMA.format(operation_ids=operation_ids)
    )
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
