"""The boto3 MTurk client and every call made through it.

Every call goes through `mturk_call`, which retries throttling, server faults and network
errors, and turns MTurk's refusals into `MTurkError` messages a person can act on. The
client comes from `mturk_client_for`: the caller's (`client=`, which tests use to pass a
`botocore.stub.Stubber`-wrapped client) or a new one for the sandbox or production.
Credentials come only from boto3's default chain (environment, profile, instance role):
nothing here stores or logs them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

from .errors import MTurkError
from .protocol import PRODUCTION_ENDPOINT, REGION, SANDBOX_ENDPOINT

logger = logging.getLogger(__name__)

RETRY_CODES = frozenset(
    {
        "ThrottlingException",
        "Throttling",
        "ServiceUnavailable",
        "ServiceFault",
        "InternalError",
        "RequestTimeout",
    }
)
RETRY_TRIES = 4
RETRY_BASE_SECONDS = 0.5  # 0.5, 1, 2 s between tries
PAGE_SIZE = 100  # MTurk's largest page
# (connect, read) seconds: commands and tasks can wait; a page request cannot.
PATIENT_TIMEOUTS_S = (10, 30)
QUICK_TIMEOUTS_S = (2, 3)


def mturk_client(*, production: bool, quick: bool = False) -> Any:
    """Return a boto3 MTurk client for the sandbox (default) or production.

    Credentials come from boto3's default chain only; retries are `mturk_call`'s job, so every
    call is retried the same way whatever the client. `quick`: the timeouts a page request
    can wait for. `MTURK_ENDPOINT_URL` (the soak's stand-in) replaces both endpoints.
    """
    import boto3
    from botocore.config import Config
    from django.conf import settings

    connect, read = QUICK_TIMEOUTS_S if quick else PATIENT_TIMEOUTS_S
    endpoint = PRODUCTION_ENDPOINT if production else SANDBOX_ENDPOINT
    return boto3.client(
        "mturk",
        region_name=REGION,
        endpoint_url=settings.MTURK_ENDPOINT_URL or endpoint,
        config=Config(
            retries={"total_max_attempts": 1}, connect_timeout=connect, read_timeout=read
        ),
    )


def mturk_client_for(*, production: bool, client: Any = None) -> Any:
    """Return the caller's client, or else a new one for the sandbox or production.

    Every service gets its client here, so this module's `mturk_client` is the one place
    that makes clients (and the one that tests replace).
    """
    return client or mturk_client(production=production)


def mturk_call(client: Any, method: str, **params: Any) -> dict[str, Any]:
    """Call one MTurk operation, retrying throttling, server faults and network errors."""
    from botocore.exceptions import (
        ClientError,
        ConnectionError,
        HTTPClientError,
        NoCredentialsError,
        ParamValidationError,
        PartialCredentialsError,
    )

    operation = client.meta.method_to_api_mapping.get(method, method)
    for attempt in range(RETRY_TRIES):
        last = attempt == RETRY_TRIES - 1
        try:
            return getattr(client, method)(**params)
        except ClientError as exc:
            error = exc.response.get("Error", {})
            code, message = error.get("Code", "Unknown"), error.get("Message", "")
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
            if last or not (code in RETRY_CODES or status >= 500):
                raise MTurkError(f"MTurk {operation} failed ({code}): {message}") from exc
        except (NoCredentialsError, PartialCredentialsError):
            raise MTurkError(
                "no AWS credentials for MTurk: set AWS_ACCESS_KEY_ID and "
                "AWS_SECRET_ACCESS_KEY (or AWS_PROFILE) in the environment, or run where an "
                "instance role may use MTurk"
            ) from None
        except (ConnectionError, HTTPClientError) as exc:  # unreachable, timed out
            if last:
                raise MTurkError(f"MTurk {operation}: cannot reach MTurk ({exc})") from exc
        except ParamValidationError as exc:  # refused by the client before sending
            raise MTurkError(f"MTurk {operation}: {exc}") from exc
        delay = RETRY_BASE_SECONDS * 2**attempt
        logger.info("MTurk %s: retrying in %.1f s", operation, delay)
        time.sleep(delay)
    raise AssertionError("unreachable")


def mturk_pages(client: Any, method: str, key: str, **params: Any) -> Iterator[dict[str, Any]]:
    """Yield every element of a paginated list, following NextToken."""
    token = None
    while True:
        page = mturk_call(
            client,
            method,
            MaxResults=PAGE_SIZE,
            **params,
            **({"NextToken": token} if token else {}),
        )
        yield from page.get(key, [])
        token = page.get("NextToken")
        if not token:
            return
