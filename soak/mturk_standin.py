"""An MTurk stand-in for the soak run: MTurk's requester API on a local port, in-process.

It speaks MTurk's real protocol (AWS JSON 1.1: `POST /`, `X-Amz-Target:
MTurkRequesterServiceV20170117.<Operation>`, a JSON body, a JSON answer, errors as
`{"__type": "RequestError", "Message": ...}` with HTTP 400), so the platform's own boto3
clients talk to it through `MTURK_ENDPOINT_URL`, signatures and all. Only the operations
that publishing, the sync and the HIT page's verification call are here (shapes:
botocore's `mturk/2017-01-17/service-2.json`).

The worker side is what MTurk does for a genuine worker: `accept` hands out an assignment
of a HIT (never more than its MaxAssignments), and `submit` is the worker's browser
posting to MTurk's externalSubmit. Like MTurk, `GetAssignment` and
`ListAssignmentsForHIT` show an assignment only once it is submitted.
"""

from __future__ import annotations

import json
import re
import secrets
import threading
import time
from collections import Counter
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TARGET_PREFIX = "MTurkRequesterServiceV20170117."
CONTENT_TYPE = "application/x-amz-json-1.1"
SHOWN = ("Submitted", "Approved", "Rejected")  # what MTurk lets a requester see
_EXTERNAL_URL = re.compile(r"<ExternalURL>(.*?)</ExternalURL>", re.S)


class RequestError(Exception):
    """MTurk's answer to a request it refuses (HTTP 400, `__type` RequestError)."""


def mturk_id(prefix: str) -> str:
    """An id shaped like MTurk's: 30 upper-case letters and digits."""
    return (prefix + secrets.token_hex(16).upper())[:30]


class MTurkStandIn:
    """HIT types, HITs and assignments, kept in memory behind one lock."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.hit_types: dict[str, dict[str, Any]] = {}
        self.hits: dict[str, dict[str, Any]] = {}
        self.assignments: dict[str, dict[str, Any]] = {}
        self.tokens: set[str] = set()
        self.calls: Counter = Counter()  # operation name -> requests answered
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def start(self) -> MTurkStandIn:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    # --- the worker side: what MTurk's worker site does -------------------------------

    def accept(self, hit_id: str, worker_id: str) -> str:
        """Hand a worker an assignment of a HIT; RequestError when none is left."""
        with self.lock:
            hit = self._hit(hit_id)
            taken = sum(1 for a in self.assignments.values() if a["HITId"] == hit_id)
            if taken >= hit["MaxAssignments"]:
                raise RequestError(f"HIT {hit_id} has no assignment left")
            if any(
                a["HITId"] == hit_id and a["WorkerId"] == worker_id
                for a in self.assignments.values()
            ):
                raise RequestError(f"worker {worker_id} already took HIT {hit_id}")
            assignment_id = mturk_id("3A")
            self.assignments[assignment_id] = {
                "AssignmentId": assignment_id,
                "WorkerId": worker_id,
                "HITId": hit_id,
                "AssignmentStatus": "Accepted",  # not one of MTurk's shown statuses yet
                "AcceptTime": time.time(),
            }
            hit["NumberOfAssignmentsPending"] = hit.get("NumberOfAssignmentsPending", 0) + 1
            return assignment_id

    def submit(self, assignment_id: str) -> None:
        """The worker's browser posts the assignment to externalSubmit."""
        with self.lock:
            entry = self.assignments[assignment_id]
            if entry["AssignmentStatus"] == "Accepted":
                hit = self.hits[entry["HITId"]]
                entry.update(
                    AssignmentStatus="Submitted",
                    SubmitTime=time.time(),
                    AutoApprovalTime=time.time() + hit["AutoApprovalDelayInSeconds"],
                    Answer="<QuestionFormAnswers/>",
                )

    def external_url(self, hit_id: str) -> str:
        """The page MTurk frames for a HIT: its ExternalQuestion's URL."""
        with self.lock:
            question = self._hit(hit_id)["Question"]
        found = _EXTERNAL_URL.search(question)
        if not found:
            raise RequestError(f"HIT {hit_id} is not an ExternalQuestion")
        return found.group(1).replace("&amp;", "&")

    # --- the requester API ------------------------------------------------------------

    def answer(self, operation: str, body: dict[str, Any]) -> dict[str, Any]:
        """One API call: the response's JSON, or RequestError."""
        method = getattr(self, f"_op_{operation}", None)
        if method is None:
            raise RequestError(f"{operation} is not implemented by the soak's stand-in")
        with self.lock:
            self.calls[operation] += 1
            return method(body)

    def _hit(self, hit_id: str) -> dict[str, Any]:
        hit = self.hits.get(hit_id or "")
        if hit is None:
            raise RequestError(f"Hit {hit_id} does not exist. (1700000000000)")
        return hit

    def _assignment(self, assignment_id: str, statuses=SHOWN) -> dict[str, Any]:
        entry = self.assignments.get(assignment_id or "")
        if entry is None or entry["AssignmentStatus"] not in statuses:
            raise RequestError(f"Assignment {assignment_id} does not exist. (1700000000000)")
        return entry

    def _token_once(self, body: dict[str, Any]) -> None:
        token = body.get("UniqueRequestToken")
        if token:
            if token in self.tokens:
                raise RequestError(
                    f"The HIT with ID ... already exists for token {token}. (1700000000000)"
                )
            self.tokens.add(token)

    def _op_CreateHITType(self, body: dict[str, Any]) -> dict[str, Any]:
        # MTurk answers the same HITTypeId for the same settings.
        key = json.dumps(body, sort_keys=True)
        for type_id, known in self.hit_types.items():
            if known["key"] == key:
                return {"HITTypeId": type_id}
        type_id = mturk_id("3T")
        self.hit_types[type_id] = {"key": key, **body}
        return {"HITTypeId": type_id}

    def _op_CreateHITWithHITType(self, body: dict[str, Any]) -> dict[str, Any]:
        hit_type = self.hit_types.get(body.get("HITTypeId", ""))
        if hit_type is None:
            raise RequestError(f"HITType {body.get('HITTypeId')} does not exist.")
        self._token_once(body)
        now = time.time()
        hit_id = mturk_id("3H")
        self.hits[hit_id] = {
            "HITId": hit_id,
            "HITTypeId": body["HITTypeId"],
            "HITGroupId": "3G" + body["HITTypeId"][2:],
            "CreationTime": now,
            "Title": hit_type.get("Title", ""),
            "Question": body.get("Question", ""),
            "HITStatus": "Assignable",
            "MaxAssignments": int(body.get("MaxAssignments", 1)),
            "Reward": hit_type.get("Reward", "0.00"),
            "AutoApprovalDelayInSeconds": hit_type.get("AutoApprovalDelayInSeconds", 259200),
            "AssignmentDurationInSeconds": hit_type.get("AssignmentDurationInSeconds", 3600),
            "Expiration": now + int(body["LifetimeInSeconds"]),
            "RequesterAnnotation": body.get("RequesterAnnotation", ""),
        }
        return {"HIT": self._hit_view(self.hits[hit_id])}

    def _hit_view(self, hit: dict[str, Any]) -> dict[str, Any]:
        return {key: value for key, value in hit.items() if key != "NumberOfAssignmentsPending"}

    def _op_ListHITs(self, body: dict[str, Any]) -> dict[str, Any]:
        return _page(body, [self._hit_view(hit) for hit in self.hits.values()], "HITs")

    def _op_GetHIT(self, body: dict[str, Any]) -> dict[str, Any]:
        return {"HIT": self._hit_view(self._hit(body.get("HITId")))}

    def _op_ListAssignmentsForHIT(self, body: dict[str, Any]) -> dict[str, Any]:
        self._hit(body.get("HITId"))
        statuses = body.get("AssignmentStatuses") or SHOWN
        listed = [
            dict(entry)
            for entry in self.assignments.values()
            if entry["HITId"] == body["HITId"] and entry["AssignmentStatus"] in statuses
        ]
        return _page(body, listed, "Assignments")

    def _op_GetAssignment(self, body: dict[str, Any]) -> dict[str, Any]:
        entry = self._assignment(body.get("AssignmentId"))
        return {"Assignment": dict(entry), "HIT": self._hit_view(self.hits[entry["HITId"]])}

    def _op_ApproveAssignment(self, body: dict[str, Any]) -> dict[str, Any]:
        entry = self._assignment(body.get("AssignmentId"))
        override = entry["AssignmentStatus"] == "Rejected" and body.get("OverrideRejection")
        if entry["AssignmentStatus"] != "Submitted" and not override:
            raise RequestError(
                f"This operation can be called with a status of: Submitted "
                f"(assignment {entry['AssignmentId']} is {entry['AssignmentStatus']})"
            )
        entry.update(AssignmentStatus="Approved", ApprovalTime=time.time())
        if body.get("RequesterFeedback"):
            entry["RequesterFeedback"] = body["RequesterFeedback"]
        return {}

    def _op_RejectAssignment(self, body: dict[str, Any]) -> dict[str, Any]:
        entry = self._assignment(body.get("AssignmentId"))
        if entry["AssignmentStatus"] != "Submitted":
            raise RequestError(
                f"This operation can be called with a status of: Submitted "
                f"(assignment {entry['AssignmentId']} is {entry['AssignmentStatus']})"
            )
        if not body.get("RequesterFeedback"):
            raise RequestError("RequesterFeedback is required to reject an assignment")
        entry.update(
            AssignmentStatus="Rejected",
            RejectionTime=time.time(),
            RequesterFeedback=body["RequesterFeedback"],
        )
        return {}

    def _op_CreateAdditionalAssignmentsForHIT(self, body: dict[str, Any]) -> dict[str, Any]:
        hit = self._hit(body.get("HITId"))
        self._token_once(body)
        hit["MaxAssignments"] += int(body["NumberOfAdditionalAssignments"])
        return {}


def _page(body: dict[str, Any], rows: list[dict[str, Any]], key: str) -> dict[str, Any]:
    """One page of a list (MaxResults, opaque NextToken), as MTurk pages its lists."""
    size = int(body.get("MaxResults") or 10)
    if not 1 <= size <= 100:
        raise RequestError("MaxResults must be between 1 and 100")
    token = body.get("NextToken")
    start = 0
    if token:
        if not token.startswith("p") or not token[1:].isdigit():
            raise RequestError(f"NextToken {token} is not valid")
        start = int(token[1:])
    chunk = rows[start : start + size]
    answer: dict[str, Any] = {key: chunk, "NumResults": len(chunk)}
    if start + size < len(rows):
        answer["NextToken"] = f"p{start + size}"
    return answer


def _handler(standin: MTurkStandIn) -> Callable[..., BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # boto3 keeps its connections open

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            target = self.headers.get("X-Amz-Target", "")
            if not target.startswith(TARGET_PREFIX):
                return self._send(400, {"__type": "UnknownOperationException"})
            if not self.headers.get("Authorization", "").startswith("AWS4-HMAC-SHA256"):
                return self._send(
                    400,
                    {"__type": "MissingAuthenticationTokenException", "Message": "unsigned"},
                )
            try:
                body = json.loads(raw or b"{}")
                answer = standin.answer(target.removeprefix(TARGET_PREFIX), body)
            except (ValueError, KeyError, TypeError) as exc:
                return self._send(400, {"__type": "RequestError", "Message": repr(exc)})
            except RequestError as exc:
                return self._send(400, {"__type": "RequestError", "Message": str(exc)})
            self._send(200, answer)

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", CONTENT_TYPE)
            self.send_header("Content-Length", str(len(data)))
            self.send_header("x-amzn-RequestId", secrets.token_hex(16))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # quiet: the soak prints one JSON line

    return Handler
