"""The soak run's rows and checks, written and read through Django in the run's own process.

Import after `django_start`: the module-level imports below need Django set up, so the
functions import the models themselves.
"""

from __future__ import annotations

import os
import secrets
import sys
from collections import Counter
from dataclasses import dataclass
from importlib import import_module

from .client import Browser
from .processes import ROOT


def django_start(env: dict[str, str]) -> None:
    """Set Django up in this process with the run's environment (database, cache, key)."""
    os.environ.update(env)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    import django

    django.setup()


def browsers_make(prefix: str, count: int, port: int) -> list[Browser]:
    """`count` worker accounts, each logged in: a session written as a login would write it."""
    from django.conf import settings
    from django.contrib.auth import (
        BACKEND_SESSION_KEY,
        HASH_SESSION_KEY,
        SESSION_KEY,
        get_user_model,
    )

    from annotation.handout import worker_for_user

    store = import_module(settings.SESSION_ENGINE).SessionStore
    users = get_user_model().objects.bulk_create(
        [get_user_model()(username=f"{prefix}{i:05d}", password="!") for i in range(count)]
    )
    browsers = []
    for user in users:
        worker_for_user(user=user)
        session = store()
        session[SESSION_KEY] = str(user.pk)
        session[BACKEND_SESSION_KEY] = settings.AUTHENTICATION_BACKENDS[0]
        session[HASH_SESSION_KEY] = user.get_session_auth_hash()
        session.create()
        browsers.append(
            Browser(port, settings.SESSION_COOKIE_NAME, session.session_key, secrets.token_hex(16))
        )
    return browsers


def annotating_batch(name: str, *, n_hits: int, max_assignments: int) -> int:
    """A batch taking answers, with `n_hits` HITs of 16 distinct task pairs and 2 goldens.

    The submit benchmark's rows (benchmarks/submit_fixture.py): written directly, as
    building would leave them, on a dataset of images without files. Returns the batch id.
    """
    _benchmarks_importable()
    from common import dataset_create
    from submit_fixture import CAPTIONS_PER_IMAGE, N_IMAGES, batch_with_hits

    from annotation.models import HIT, BatchState

    dataset, image_pks, caption_pks = dataset_create(
        name=f"{name} data",
        description="soak run",
        n_images=N_IMAGES,
        captions_per_image=CAPTIONS_PER_IMAGE,
        caption_text="picture {n}, caption {j}",
    )
    hits = batch_with_hits(
        dataset,
        image_pks,
        caption_pks,
        name,
        n_hits,
        BatchState.ANNOTATING,
        max_assignments=max_assignments,
    )
    return HIT.objects.values_list("batch_id", flat=True).get(pk=hits[0].hit_id)


def answers_for(page: dict, rng) -> list[dict]:
    """A whole HIT's answers as the page sends them, drawn as the submit benchmark draws them."""
    _benchmarks_importable()
    from submit_load import answers_make

    return answers_make(rng, [item["id"] for item in page["items"]])


def _benchmarks_importable() -> None:
    """The benchmarks' modules import each other by plain name: put their folder on the path."""
    folder = str(ROOT / "benchmarks")
    if folder not in sys.path:
        sys.path.insert(0, folder)


@dataclass
class Ledger:
    """What the database holds against what the clients were told was stored."""

    accepted: int
    lost: int  # a 2xx answer whose judgements are not all stored
    mismatched: int  # stored answers that differ from those sent
    duplicated: int  # a worker holding two assignments of one HIT, or a judgement twice
    over_limit: int  # HITs with more live assignments than they allow


def ledger_check(batch_id: int, accepted: dict[int, list[dict]]) -> Ledger:
    """Compare the stored judgements of the batch with the answers each 2xx confirmed."""
    from django.db.models import Count, F, Q

    from annotation.handout import ACTIVE_STATUSES
    from annotation.models import HIT, Assignment, Judgement
    from annotation.pages import page_numbers

    judgements = Judgement.objects.filter(assignment__hit__batch_id=batch_id)
    stored: dict[int, dict[int, str]] = {}
    for assignment_id, item_id, level in judgements.values_list(
        "assignment_id", "item_id", "level"
    ):
        stored.setdefault(assignment_id, {})[item_id] = level
    lost = mismatched = 0
    handed_out = Assignment.objects.in_bulk(list(accepted))
    for assignment_id, answers in accepted.items():
        # The clients name pairs by their numbers on the page (annotation.pages).
        number = page_numbers(assignment=handed_out[assignment_id])
        mine = {number[item]: level for item, level in stored.get(assignment_id, {}).items()}
        sent = {answer["item"]: answer["level"] for answer in answers}
        if len(mine) < len(sent):
            lost += 1
        elif mine != sent:
            mismatched += 1
    twice_judged = sum(
        n > 1 for n in Counter(judgements.values_list("assignment_id", "item_id")).values()
    )
    twice_taken = (
        Assignment.objects.filter(hit__batch_id=batch_id)
        .values("hit", "worker")
        .annotate(n=Count("pk"))
        .filter(n__gt=1)
        .count()
    )
    over_limit = (
        HIT.objects.filter(batch_id=batch_id)
        .annotate(live=Count("assignments", filter=Q(assignments__status__in=ACTIVE_STATUSES)))
        .filter(live__gt=F("max_assignments"))
        .count()
    )
    return Ledger(len(accepted), lost, mismatched, twice_judged + twice_taken, over_limit)
