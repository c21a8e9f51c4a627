"""A worker's browser as the soak run drives it: a session cookie, a CSRF token, JSON calls.

A dropped connection (a gunicorn worker killed mid-request) is status 0, not an exception,
so the caller decides whether to retry.
"""

from __future__ import annotations

import http.client
import json
from dataclasses import dataclass
from typing import Any

DROPPED = 0  # the connection broke before a response came back


@dataclass
class Browser:
    """One logged-in worker: its session and CSRF cookies, on one server port."""

    port: int
    session_cookie: str
    session_key: str
    csrf_token: str

    def post_json(self, path: str, payload: Any | None = None) -> tuple[int, Any]:
        body = b"" if payload is None else json.dumps(payload).encode()
        headers = {
            "Content-Type": "application/json",
            "X-CSRFToken": self.csrf_token,
            "Cookie": f"{self.session_cookie}={self.session_key}; csrftoken={self.csrf_token}",
        }
        return request(self.port, "POST", path, body, headers)


def request(
    port: int, method: str, path: str, body: bytes | None = None, headers: dict | None = None
) -> tuple[int, Any]:
    """One request on a fresh connection; (status, parsed JSON or text); (0, error) if dropped."""
    status, data, _ = exchange(port, method, path, body, headers)
    if status == DROPPED:
        return DROPPED, data.decode()
    if not data:
        return status, None
    try:
        return status, json.loads(data)
    except ValueError:
        return status, data[:300].decode(errors="replace")


def exchange(
    port: int, method: str, path: str, body: bytes | None = None, headers: dict | None = None
) -> tuple[int, bytes, dict[str, str]]:
    """One request on a fresh connection: (status, whole body, response headers); a dropped
    connection is (0, the error's repr, {})."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        data = response.read()
    except (OSError, http.client.HTTPException) as exc:
        return DROPPED, repr(exc).encode(), {}
    finally:
        conn.close()
    return response.status, data, dict(response.getheaders())
