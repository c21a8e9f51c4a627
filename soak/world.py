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

ANSWER_LEVELS = ("yes", "weak_yes", "weak_no", "no")
FOLLOWUPS = {
    "weak_yes": {"shortcomings": ["misses_main_concept"], "wrong_concepts": []},
    "weak_no": {"shortcomings": ["wrong_description"], "wrong_concepts": ["color"]},
}
HIT_TASKS = 16  # + 1 golden TP + 1 golden TN, the default HIT


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

    Written directly, as building would leave it; images have no files (the API pages
    only link them). Returns the batch id.
    """
    from annotation.models import (
        HIT,
        Batch,
        BatchState,
        Candidate,
        Caption,
        Dataset,
        HITItem,
        Image,
        ItemRole,
        Query,
    )
    from mitl.config import parse_batch_config

    n_images = max(32, n_hits)
    dataset = Dataset.objects.create(name=f"{name} data")
    images = Image.objects.bulk_create(
        [Image(dataset=dataset, ext_id=i, file_name=f"{i}.jpg", labels=[]) for i in range(n_images)]
    )
    captions = Caption.objects.bulk_create(
        [
            Caption(dataset=dataset, ext_id=i, image=image, text=f"picture number {i}")
            for i, image in enumerate(images)
        ]
    )
    config = parse_batch_config(
        {"annotators": ["soak"], "n_image_queries": n_hits, "n_caption_queries": 0, "hit_size": 16}
    )
    batch = Batch.objects.create(
        dataset=dataset, name=name, config=config.to_json(), state=BatchState.ANNOTATING
    )
    hits = HIT.objects.bulk_create(
        [HIT(batch=batch, index=h, max_assignments=max_assignments) for h in range(n_hits)]
    )
    items = []
    for h, hit in enumerate(hits):
        query = Query.objects.create(batch=batch, direction="i2t", image=images[h])
        # Task pairs: image h with 16 other images' captions, all distinct in the batch.
        others = [captions[(h + 1 + t) % n_images] for t in range(HIT_TASKS)]
        candidates = Candidate.objects.bulk_create(
            [
                Candidate(batch=batch, query=query, direction="i2t", image=images[h], caption=c)
                for c in others
            ]
        )
        pairs = [(ItemRole.TASK, c, images[h], c.caption) for c in candidates]
        golden = images[(h + 7) % n_images]  # its own caption fits; a distant one does not
        far = captions[(golden.ext_id + n_images // 2) % n_images]
        pairs.insert(h % len(pairs), (ItemRole.GOLDEN_TP, None, golden, captions[golden.ext_id]))
        pairs.insert((h * 5) % len(pairs), (ItemRole.GOLDEN_TN, None, golden, far))
        items += [
            HITItem(hit=hit, position=p, role=role, candidate=cand, image=image, caption=caption)
            for p, (role, cand, image, caption) in enumerate(pairs)
        ]
    HITItem.objects.bulk_create(items, batch_size=5000)
    return batch.pk


def answers_for(page: dict, rng) -> list[dict]:
    """A whole HIT's answers as the page sends them, drawn at random."""
    answers = []
    for item in page["items"]:
        level = rng.choice(ANSWER_LEVELS)
        followups = FOLLOWUPS.get(level, {"shortcomings": [], "wrong_concepts": []})
        answers.append(
            {"item": item["id"], "level": level, "other_text": "", "elapsed_ms": 1500, **followups}
        )
    return answers


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

    judgements = Judgement.objects.filter(assignment__hit__batch_id=batch_id)
    stored: dict[int, dict[int, str]] = {}
    for assignment_id, item_id, level in judgements.values_list(
        "assignment_id", "item_id", "level"
    ):
        stored.setdefault(assignment_id, {})[item_id] = level
    lost = mismatched = 0
    for assignment_id, answers in accepted.items():
        mine = stored.get(assignment_id, {})
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
