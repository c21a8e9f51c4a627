"""A batch's qualification round on MTurk: one QualificationType per batch and environment,
made at publication, required by the batch's HIT type, and granted by the platform.

Two modes (`HitTypeSettings.qualification_mode`):

    test      pairs of its own (`qualification_test_pairs`: as many as a try shows here, never
              shown in a try here) become the type's Test and AnswerKey (qualification_test):
              MTurk scores the worker's answers, and the HIT type asks for the pass mark.
              MTurk gives no feedback per pair, only the score, and every retry shows the
              same test
    granted   a type without a test: the platform grants it (AssociateQualificationWithWorker,
              `mturk_qualification_grant`), e.g. to workers who passed the round here

What the platform keeps, in `Batch.mturk["qualification"][environment]`: the type's id and
name, mode, pass mark (`minimum`), number of pairs, a fingerprint of what was sent, when it
was made, and the workers it was granted to. A resumed publication reuses the stored type,
and a sandbox type is never required on production (each environment has its own entry).
"""

from __future__ import annotations

import hashlib
import json
import logging
from datetime import datetime
from typing import Any

from django.utils import timezone
from django.utils.crypto import salted_hmac

from annotation.errors import ServiceError
from annotation.models import Batch, QualificationPair, Worker, WorkerSource
from annotation.qualification.pairs import qualification_test_pairs
from mitl.config import BatchConfig, batch_config

from .client import mturk_call, mturk_client_for, mturk_pages
from .errors import MTurkError, MTurkInputError
from .hit_settings import batch_hit_settings
from .hit_type import QUALIFICATION_GUARDS, HitTypeSettings
from .links import public_base_url, qualification_image_path
from .protocol import PRODUCTION, SANDBOX
from .qualification_test import (
    QualificationQuestion,
    answer_key_xml,
    image_subtype,
    pairs_to_pass,
    pass_mark,
    qualification_requirement,
    question_form_xml,
    time_allowed_seconds,
)
from .state import now_iso, state_read, state_update

logger = logging.getLogger(__name__)

GRANTED_VALUE = 100  # a granted qualification counts as a test passed with every pair right
KEYWORDS = "image, description, caption, qualification, test"
_NAME_SALT = "mitl.mturk.qualification-name"
_WORKER_ID_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")


def mturk_qualification_ensure(
    *, batch: Batch, client: Any, production: bool, base_url: str | None = None
) -> str | None:
    """Return the QualificationTypeId the batch's HITs require on this environment.

    None when the batch's config asks for no qualification round. Otherwise the stored
    type when it still matches the round and settings (or HITs already require it), else a
    new one made now. A type that MTurk made just before a crash is found again by its name
    (a CreateQualificationType refused as a repeat name).
    """
    config = batch_config(batch)
    if not config.qualification_required:
        return None
    environment = PRODUCTION if production else SANDBOX
    state = state_read(batch)
    stored = state.get("qualification", {}).get(environment)
    if stored and _hits_on(batch, state, environment):
        return stored["id"]  # published HITs require it: it stays for the batch
    hit_settings = _hit_settings(batch)
    pairs = _pairs(batch) if hit_settings.qualification_mode == "test" else []
    count = len(pairs) or config.qualification_pairs  # granted: as the platform's round
    base = public_base_url(base_url, production=production)
    request = _type_request(batch, config, hit_settings, pairs, base=base)
    fingerprint = hashlib.sha256(json.dumps(request, sort_keys=True).encode()).hexdigest()[:16]
    if stored and stored.get("fingerprint") == fingerprint:
        return stored["id"]
    name = qualification_name(batch.pk, environment=environment, fingerprint=fingerprint)
    type_id = _type_create(client, name=name, request=request)
    entry = {
        "id": type_id,
        "name": name,
        "mode": hit_settings.qualification_mode,
        "minimum": pass_mark(config.qualification_pass, count),
        "pairs": count,
        "fingerprint": fingerprint,
        "created_at": now_iso(timezone.now()),
        "grants": {},
    }

    def store(state: dict[str, Any]) -> None:
        qualification = dict(state.get("qualification", {}))
        qualification[environment] = entry
        state["qualification"] = qualification

    state_update(batch.pk, store)
    logger.info("batch %s: qualification type %s on %s", batch.pk, type_id, environment)
    return type_id


def mturk_qualification_requirement(*, batch: Batch, production: bool) -> dict[str, Any] | None:
    """Return the QualificationRequirement for the batch's stored type on this environment."""
    environment = PRODUCTION if production else SANDBOX
    stored = state_read(batch).get("qualification", {}).get(environment)
    if not stored:
        return None
    guard = QUALIFICATION_GUARDS[stored["mode"]]
    return qualification_requirement(stored["id"], minimum=stored["minimum"], actions_guarded=guard)


def mturk_qualification_grant(
    *, batch: Batch, worker: Worker, client: Any = None, now: datetime | None = None
) -> bool:
    """Grant the batch's qualification (granted mode) to an MTurk worker, once.

    Returns False when the platform had granted it already (nothing is sent). The grant
    goes to the environment the batch is published on; MTurk emails the worker.
    """
    if worker.source != WorkerSource.MTURK:
        raise MTurkError(f"{worker} is not an MTurk worker: MTurk qualifications are for them")
    worker_id = (worker.external_id or "").strip()
    if not _worker_id_valid(worker_id):
        raise MTurkError(
            f"{worker_id!r} is not an MTurk WorkerId (capital letters and digits, starting with A)"
        )
    state = state_read(batch)
    environment = state.get("environment")
    if not environment:
        raise MTurkError(
            f"batch {batch.pk} is not published on MTurk: its qualification is made at "
            "publication, so publish it first"
        )
    stored = state.get("qualification", {}).get(environment)
    if not stored:
        raise MTurkError(
            f"batch {batch.pk} has no qualification on {environment}: its config asks for no "
            "qualification round (`qualification_pairs` is 0)"
        )
    if stored["mode"] != "granted":
        raise MTurkError(
            f"batch {batch.pk}'s qualification on {environment} is MTurk's test (mode "
            f"{stored['mode']}): workers earn it by passing the test. Only a batch published "
            "with `qualification_mode` granted is granted by the platform"
        )
    if worker_id in stored.get("grants", {}):
        return False
    client = mturk_client_for(production=environment == PRODUCTION, client=client)
    mturk_call(
        client,
        "associate_qualification_with_worker",
        QualificationTypeId=stored["id"],
        WorkerId=worker_id,
        IntegerValue=GRANTED_VALUE,
        SendNotification=True,
    )
    when = now_iso(now or timezone.now())

    def store(state: dict[str, Any]) -> None:
        qualification = dict(state.get("qualification", {}))
        entry = dict(qualification.get(environment, {}))
        if entry.get("id") != stored["id"]:
            return  # the type was replaced meanwhile (a sandbox reset): keep nothing stale
        entry["grants"] = {**entry.get("grants", {}), worker_id: {"at": when}}
        qualification[environment] = entry
        state["qualification"] = qualification

    state_update(batch.pk, store)
    return True


def mturk_qualification_overview(*, batch: Batch) -> dict[str, Any] | None:
    """Return what the MTurk page shows of the batch's qualification (None: no round)."""
    config = batch_config(batch)
    if not config.qualification_required:
        return None
    state = batch.mturk or {}
    environment = state.get("environment")
    stored = state.get("qualification", {}).get(environment) if environment else None
    pairs = stored["pairs"] if stored else config.qualification_pairs
    try:
        mode = batch_hit_settings(batch).qualification_mode
    except MTurkInputError:
        mode = HitTypeSettings().qualification_mode
    return {
        "mode": stored["mode"] if stored else mode,
        "pairs": pairs,
        "to_pass": pairs_to_pass(config.qualification_pass, pairs),
        "minimum": stored["minimum"] if stored else pass_mark(config.qualification_pass, pairs),
        "attempts": config.qualification_attempts,
        "environment": environment,
        "type_id": stored["id"] if stored else "",
        "name": stored["name"] if stored else "",
        "grants": sorted(stored.get("grants", {})) if stored else [],
    }


def _worker_id_valid(worker_id: str) -> bool:
    """Say whether `worker_id` looks like MTurk's WorkerId (its API: ^A[A-Z0-9]+$, ≤ 64)."""
    return (
        worker_id.startswith("A")
        and 1 < len(worker_id) <= 64
        and not set(worker_id) - _WORKER_ID_CHARS
    )


def qualification_name(batch_id: int, *, environment: str, fingerprint: str) -> str:
    """Return the type's name: readable, and unique per platform, batch and content.

    MTurk wants names unique per requester account, which several installations (or a
    database restored from a backup) may share: the nonce comes from this installation's
    SECRET_KEY. The same batch, environment and content give the same name, so a type
    made just before a crash is found again.
    """
    nonce = salted_hmac(_NAME_SALT, f"{environment}:{batch_id}:{fingerprint}").hexdigest()[:10]
    return f"Image descriptions: qualification for batch {batch_id} ({nonce})"


def _hits_on(batch: Batch, state: dict[str, Any], environment: str) -> bool:
    """Say whether HITs of the batch are on MTurk in this environment."""
    return (
        state.get("environment") == environment
        and batch.hits.filter(external_id__isnull=False).exists()
    )


def _hit_settings(batch: Batch) -> HitTypeSettings:
    try:
        return batch_hit_settings(batch)
    except MTurkInputError as exc:
        raise MTurkError(str(exc)) from exc


def _pairs(batch: Batch) -> list[QualificationPair]:
    """Return the pairs of the batch's MTurk test in order, drawn now if it has none yet:
    pairs of its own, never shown in a try on the platform (whose feedback tells answers)."""
    try:
        return qualification_test_pairs(batch=batch)
    except ServiceError as exc:  # a publication reports MTurkErrors (last_publish)
        raise MTurkError(str(exc)) from exc


def _type_request(
    batch: Batch,
    config: BatchConfig,
    hit_settings: HitTypeSettings,
    pairs: list[QualificationPair],
    *,
    base: str,
) -> dict[str, Any]:
    """Return CreateQualificationType's arguments, less the Name."""
    request: dict[str, Any] = {"Keywords": KEYWORDS, "QualificationTypeStatus": "Active"}
    if hit_settings.qualification_mode == "granted":
        request["Description"] = (
            f"Lets you work on batch {batch.pk}'s image description HITs. The requester grants "
            "it to workers who passed this batch's qualification round; there is no test to "
            "take here."
        )
        return request
    count = len(pairs)
    to_pass = pairs_to_pass(config.qualification_pass, count)
    minimum = pass_mark(config.qualification_pass, count)
    retry = config.qualification_attempts > 1
    request["Description"] = (
        f"A short test before batch {batch.pk}'s image description HITs: {count} pairs of an "
        f"image and a description with known answers. Answer at least {to_pass} of {count} "
        f"right ({minimum}%) to work on the HITs."
        + (
            f" If you do not pass, you may take the same test again after "
            f"{_duration(hit_settings.qualification_retry_minutes)}."
            if retry
            else " You can take it once."
        )
    )
    questions = [_question(pair, number, base=base) for number, pair in enumerate(pairs, 1)]
    try:
        request["Test"] = question_form_xml(
            questions, title=f"Qualification test: image descriptions (batch {batch.pk})"
        )
        request["AnswerKey"] = answer_key_xml(questions)
    except MTurkInputError as exc:
        raise MTurkError(str(exc)) from exc
    request["TestDurationInSeconds"] = time_allowed_seconds(count)
    if retry:  # MTurk cannot count tries: either one, or as many as the delay allows
        request["RetryDelayInSeconds"] = hit_settings.qualification_retry_minutes * 60
    return request


def _question(pair: QualificationPair, number: int, *, base: str) -> QualificationQuestion:
    if not pair.image.file:
        raise MTurkError(
            f"qualification pair {pair.position} of batch {pair.batch_id} has no image file: "
            "MTurk's test shows the images (or set `qualification_mode` to granted)"
        )
    try:
        subtype = image_subtype(pair.image.file.name)
    except MTurkInputError as exc:
        raise MTurkError(str(exc)) from exc
    return QualificationQuestion(
        identifier=f"pair-{number}",
        caption=pair.caption.text,
        image_url=base + qualification_image_path(pair.pk),
        image_subtype=subtype,
        positive=pair.positive,
    )


def _duration(minutes: int) -> str:
    if minutes % (24 * 60) == 0:
        days = minutes // (24 * 60)
        return f"{days} day" + ("s" if days != 1 else "")
    if minutes % 60 == 0:
        hours = minutes // 60
        return f"{hours} hour" + ("s" if hours != 1 else "")
    return f"{minutes} minutes"


def _type_create(client: Any, *, name: str, request: dict[str, Any]) -> str:
    """Create the type; when MTurk refuses the name as taken, return the type of that name."""
    try:
        answer = mturk_call(client, "create_qualification_type", Name=name, **request)
    except MTurkError as refusal:
        if not _request_error(refusal):
            raise
        found = _type_find(client, name)
        if found is None:
            raise
        logger.info("qualification type %r existed already: %s", name, found)
        return found
    return answer["QualificationType"]["QualificationTypeId"]


def _request_error(error: MTurkError) -> bool:
    """Say whether MTurk refused the request itself (not throttling, faults or the network)."""
    from botocore.exceptions import ClientError

    cause = error.__cause__
    return isinstance(cause, ClientError) and cause.response.get("Error", {}).get("Code") == (
        "RequestError"
    )


def _type_find(client: Any, name: str) -> str | None:
    """Return the id of this requester's qualification type called exactly `name`."""
    for found in mturk_pages(
        client,
        "list_qualification_types",
        "QualificationTypes",
        Query=name,
        MustBeRequestable=False,  # a type without a test (granted mode) too
        MustBeOwnedByCaller=True,
    ):
        if found.get("Name") == name:
            return found["QualificationTypeId"]
    return None
