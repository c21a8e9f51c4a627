"""Database constraints of the data model: every bad row is refused by the database itself.

Each test first saves a valid row of the same shape (so the fixture is known to be sound),
then shows that the database rejects the bad variant. Check constraints are named in the
error on both SQLite and PostgreSQL; unique constraints are named by PostgreSQL only.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from io import StringIO
from types import SimpleNamespace

import pytest
from django.core.management import call_command
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from annotation.models import (
    HIT,
    Assignment,
    Batch,
    BatchStageProgress,
    Candidate,
    Caption,
    Dataset,
    HITItem,
    Image,
    Judgement,
    MachineAnnotator,
    PositivePair,
    PositiveSet,
    Proposal,
    Query,
    Ranking,
    Release,
    Verdict,
    Worker,
)
from mitl.judgements import SHORTCOMINGS_MASK_MAX, WRONG_CONCEPTS_MASK_MAX

pytestmark = pytest.mark.django_db

WRONG_DESCRIPTION = 1 << 2  # SHORTCOMINGS.index("wrong_description")
NOT_IN_IMAGE = 1 << 0


def assert_refused(constraint: str, create: Callable[[], object]) -> None:
    """Assert that `create()` raises IntegrityError because of `constraint`."""
    with pytest.raises(IntegrityError) as info, transaction.atomic():
        create()
    message = str(info.value)
    if connection.vendor == "postgresql" or "UNIQUE" not in message:
        assert constraint in message


@pytest.fixture
def world():
    """A minimal hand-made dataset, batch, HIT, worker and assignment."""
    dataset = Dataset.objects.create(name="tiny")
    images = [Image.objects.create(dataset=dataset, ext_id=10 + i) for i in range(3)]
    captions = [
        Caption.objects.create(
            dataset=dataset, ext_id=100 + i, image=images[i], text=f"caption {i}"
        )
        for i in range(3)
    ]
    annotator = MachineAnnotator.objects.create(name="tfidf", kind="bow")
    batch = Batch.objects.create(dataset=dataset, name="b", config={"annotators": ["tfidf"]})
    query = Query.objects.create(batch=batch, direction="i2t", image=images[0])
    candidate = Candidate.objects.create(
        batch=batch, query=query, direction="i2t", image=images[0], caption=captions[1]
    )
    hit = HIT.objects.create(batch=batch, index=0, max_assignments=2)
    item = HITItem.objects.create(
        hit=hit, position=0, role="task", candidate=candidate, image=images[0], caption=captions[1]
    )
    worker = Worker.objects.create(source="simulated", external_id="w1")
    assignment = Assignment.objects.create(hit=hit, worker=worker)
    return SimpleNamespace(
        dataset=dataset,
        images=images,
        captions=captions,
        annotator=annotator,
        batch=batch,
        query=query,
        candidate=candidate,
        hit=hit,
        item=item,
        worker=worker,
        assignment=assignment,
    )


def test_models_and_migrations_agree():
    out = StringIO()
    call_command("makemigrations", "--check", "--dry-run", stdout=out)
    assert "No changes detected" in out.getvalue()


# --- datasets ---------------------------------------------------------------------------


def test_caption_with_empty_text_is_refused(world):
    assert_refused(
        "caption_text_not_empty",
        lambda: Caption.objects.create(
            dataset=world.dataset, ext_id=999, image=world.images[0], text=""
        ),
    )


def test_caption_ext_id_is_unique_within_a_dataset_only(world):
    other = Dataset.objects.create(name="other")
    other_image = Image.objects.create(dataset=other, ext_id=10)
    Caption.objects.create(dataset=other, ext_id=100, image=other_image, text="same id, other set")
    assert_refused(
        "caption_unique_ext_id",
        lambda: Caption.objects.create(
            dataset=world.dataset, ext_id=100, image=world.images[0], text="again"
        ),
    )


def test_image_ext_id_is_unique_within_a_dataset(world):
    assert_refused(
        "image_unique_ext_id", lambda: Image.objects.create(dataset=world.dataset, ext_id=10)
    )


def test_duplicate_positive_pair_in_a_set_is_refused(world):
    positive_set = PositiveSet.objects.create(dataset=world.dataset, name="cxc", source="imported")
    PositivePair.objects.create(
        positive_set=positive_set, image=world.images[0], caption=world.captions[0]
    )
    other_set = PositiveSet.objects.create(dataset=world.dataset, name="eccv", source="imported")
    PositivePair.objects.create(
        positive_set=other_set, image=world.images[0], caption=world.captions[0]
    )
    assert_refused(
        "positive_pair_unique",
        lambda: PositivePair.objects.create(
            positive_set=positive_set, image=world.images[0], caption=world.captions[0]
        ),
    )


def test_positive_set_source_must_be_known(world):
    assert_refused(
        "positive_set_source_valid",
        lambda: PositiveSet.objects.create(dataset=world.dataset, name="x", source="guessed"),
    )


def test_positive_set_name_is_unique_within_a_dataset(world):
    PositiveSet.objects.create(dataset=world.dataset, name="cxc", source="imported")
    assert_refused(
        "positive_set_unique_name",
        lambda: PositiveSet.objects.create(dataset=world.dataset, name="cxc", source="human"),
    )


# --- batches: queries, rankings, candidates, proposals -----------------------------------


@pytest.mark.parametrize(
    ("direction", "with_image", "with_caption"),
    [
        ("i2t", False, True),  # an image query holding a caption
        ("i2t", True, True),  # both items
        ("t2i", True, False),  # a caption query holding an image
        ("t2i", False, False),  # no item at all
        ("xyz", True, False),  # unknown direction
    ],
)
def test_query_item_must_match_its_direction(world, direction, with_image, with_caption):
    Query.objects.create(batch=world.batch, direction="t2i", caption=world.captions[2])  # valid
    assert_refused(
        "query_item_matches_direction",
        lambda: Query.objects.create(
            batch=world.batch,
            direction=direction,
            image=world.images[1] if with_image else None,
            caption=world.captions[1] if with_caption else None,
        ),
    )


def test_an_image_is_queried_once_per_batch(world):
    other_batch = Batch.objects.create(dataset=world.dataset, name="b2", config={})
    Query.objects.create(
        batch=other_batch, direction="i2t", image=world.images[0]
    )  # other batch: ok
    assert_refused(
        "query_unique_image",
        lambda: Query.objects.create(batch=world.batch, direction="i2t", image=world.images[0]),
    )


def test_a_caption_is_queried_once_per_batch(world):
    Query.objects.create(batch=world.batch, direction="t2i", caption=world.captions[0])
    assert_refused(
        "query_unique_caption",
        lambda: Query.objects.create(batch=world.batch, direction="t2i", caption=world.captions[0]),
    )


def test_one_ranking_per_query_and_annotator(world):
    Ranking.objects.create(query=world.query, annotator=world.annotator, targets=[1], scores=[0.5])
    assert_refused(
        "ranking_unique",
        lambda: Ranking.objects.create(
            query=world.query, annotator=world.annotator, targets=[2], scores=[0.4]
        ),
    )


def test_candidate_pair_is_unique_within_a_batch(world):
    t2i = Query.objects.create(batch=world.batch, direction="t2i", caption=world.captions[1])
    assert_refused(
        "candidate_unique_pair",
        lambda: Candidate.objects.create(
            batch=world.batch,
            query=t2i,
            direction="t2i",
            image=world.images[0],
            caption=world.captions[1],
        ),
    )


def test_proposal_rank_starts_at_one(world):
    Proposal.objects.create(
        candidate=world.candidate, annotator=world.annotator, query=world.query, rank=1, score=0.9
    )
    other = MachineAnnotator.objects.create(name="other", kind="bow")
    assert_refused(
        "proposal_rank_positive",
        lambda: Proposal.objects.create(
            candidate=world.candidate, annotator=other, query=world.query, rank=0, score=0.9
        ),
    )


def test_one_proposal_per_candidate_annotator_and_query(world):
    Proposal.objects.create(
        candidate=world.candidate, annotator=world.annotator, query=world.query, rank=1, score=0.9
    )
    assert_refused(
        "proposal_unique",
        lambda: Proposal.objects.create(
            candidate=world.candidate,
            annotator=world.annotator,
            query=world.query,
            rank=2,
            score=0.8,
        ),
    )


def test_batch_state_must_be_a_known_stage(world):
    assert_refused(
        "batch_state_valid",
        lambda: Batch.objects.create(dataset=world.dataset, name="x", config={}, state="finished"),
    )


def test_one_progress_row_per_batch_and_stage(world):
    BatchStageProgress.objects.create(batch=world.batch, stage="retrieving")
    assert_refused(
        "progress_unique_stage",
        lambda: BatchStageProgress.objects.create(batch=world.batch, stage="retrieving"),
    )


# --- HITs and their items ----------------------------------------------------------------


def test_hit_index_is_unique_within_a_batch(world):
    assert_refused("hit_unique_index", lambda: HIT.objects.create(batch=world.batch, index=0))


def test_hit_needs_at_least_one_assignment(world):
    assert_refused(
        "hit_max_assignments_positive",
        lambda: HIT.objects.create(batch=world.batch, index=1, max_assignments=0),
    )


def test_task_item_without_candidate_is_refused(world):
    assert_refused(
        "hit_item_candidate_iff_task",
        lambda: HITItem.objects.create(
            hit=world.hit, position=1, role="task", image=world.images[1], caption=world.captions[1]
        ),
    )


@pytest.mark.parametrize("role", ["golden_tp", "golden_tn"])
def test_golden_item_with_candidate_is_refused(world, role):
    HITItem.objects.create(  # the same golden without a candidate is fine
        hit=world.hit, position=1, role=role, image=world.images[1], caption=world.captions[1]
    )
    assert_refused(
        "hit_item_candidate_iff_task",
        lambda: HITItem.objects.create(
            hit=world.hit,
            position=2,
            role=role,
            candidate=world.candidate,
            image=world.images[0],
            caption=world.captions[1],
        ),
    )


def test_unknown_item_role_is_refused(world):
    assert_refused(
        "hit_item_candidate_iff_task",
        lambda: HITItem.objects.create(
            hit=world.hit,
            position=1,
            role="bonus",
            candidate=world.candidate,
            image=world.images[0],
            caption=world.captions[1],
        ),
    )


def test_item_position_is_unique_within_a_hit(world):
    assert_refused(
        "hit_item_unique_position",
        lambda: HITItem.objects.create(
            hit=world.hit,
            position=0,
            role="golden_tp",
            image=world.images[1],
            caption=world.captions[1],
        ),
    )


# --- workers, assignments and judgements -------------------------------------------------


def test_same_worker_cannot_take_a_hit_twice(world):
    other = Worker.objects.create(source="simulated", external_id="w2")
    Assignment.objects.create(hit=world.hit, worker=other)
    assert_refused(
        "assignment_one_per_worker",
        lambda: Assignment.objects.create(hit=world.hit, worker=world.worker),
    )


def test_worker_external_id_is_unique_per_source(world):
    Worker.objects.create(source="mturk", external_id="w1")  # same id, other source
    assert_refused(
        "worker_unique_external",
        lambda: Worker.objects.create(source="simulated", external_id="w1"),
    )


def test_assignment_status_must_be_known(world):
    assert_refused(
        "assignment_status_valid",
        lambda: Assignment.objects.filter(pk=world.assignment.pk).update(status="paid"),
    )


@pytest.mark.parametrize("status", ["submitted", "approved", "rejected"])
def test_submitted_assignment_needs_its_submission_time(world, status):
    assert_refused(
        "assignment_submitted_has_time",
        lambda: Assignment.objects.filter(pk=world.assignment.pk).update(status=status),
    )
    Assignment.objects.filter(pk=world.assignment.pk).update(
        status=status, submitted_at=timezone.now()
    )


def judgement(world, **fields) -> Judgement:
    values = {"assignment": world.assignment, "item": world.item, "level": "yes", "elapsed_ms": 10}
    values.update(fields)
    return Judgement.objects.create(**values)


def test_valid_judgement_with_every_followup_is_stored(world):
    stored = judgement(
        world,
        level="weak_no",
        shortcomings=SHORTCOMINGS_MASK_MAX,
        wrong_concepts=WRONG_CONCEPTS_MASK_MAX,
        other_text="size",
    )
    assert stored.shortcoming_names[2] == "wrong_description"
    assert stored.wrong_concept_names[-1] == "other"


@pytest.mark.parametrize("level", ["maybe", "", "YES"])
def test_judgement_level_must_be_one_of_the_four(world, level):
    assert_refused("judgement_level_valid", lambda: judgement(world, level=level))


@pytest.mark.parametrize(
    "followups",
    [
        {"shortcomings": NOT_IN_IMAGE},
        {"shortcomings": WRONG_DESCRIPTION, "wrong_concepts": 1},
        {"other_text": "size"},
    ],
)
@pytest.mark.parametrize("level", ["yes", "no"])
def test_followups_are_refused_on_an_end_level(world, level, followups):
    assert_refused(
        "judgement_followups_only_middle", lambda: judgement(world, level=level, **followups)
    )


@pytest.mark.parametrize("level", ["weak_yes", "weak_no"])
def test_wrong_concepts_need_the_wrong_description_bit(world, level):
    assert_refused(
        "judgement_concepts_need_wrong_description",
        lambda: judgement(world, level=level, shortcomings=NOT_IN_IMAGE, wrong_concepts=1),
    )
    judgement(world, level=level, shortcomings=NOT_IN_IMAGE | WRONG_DESCRIPTION, wrong_concepts=1)


@pytest.mark.parametrize(
    "masks",
    [
        {"shortcomings": SHORTCOMINGS_MASK_MAX + 1},
        {"shortcomings": WRONG_DESCRIPTION, "wrong_concepts": WRONG_CONCEPTS_MASK_MAX + 1},
    ],
)
def test_masks_beyond_the_vocabulary_are_refused(world, masks):
    assert_refused(
        "judgement_masks_in_vocabulary", lambda: judgement(world, level="weak_yes", **masks)
    )


def test_one_judgement_per_item_and_assignment(world):
    judgement(world)
    assert_refused("judgement_unique_item", lambda: judgement(world, level="no"))


# --- results ----------------------------------------------------------------------------


def verdict(world, **fields) -> Verdict:
    values = {
        "candidate": world.candidate,
        "rule": "eccv",
        "is_positive": True,
        "score": 1.0,
        "confidence": 1.0,
        "n_judgements": 1,
        "distribution": {"yes": 1},
    }
    values.update(fields)
    return Verdict.objects.create(**values)


@pytest.mark.parametrize(
    "fields",
    [{"score": 1.5}, {"score": -0.1}, {"confidence": 1.01}, {"confidence": -1.0}],
)
def test_verdict_score_and_confidence_stay_in_the_unit_interval(world, fields):
    assert_refused("verdict_unit_interval", lambda: verdict(world, **fields))


def test_verdict_needs_a_judgement(world):
    assert_refused("verdict_has_judgements", lambda: verdict(world, n_judgements=0))
    verdict(world, score=0.0, confidence=0.5)  # the bounds themselves are fine


def release(world, **fields) -> Release:
    values = {
        "dataset": world.dataset,
        "name": "tiny",
        "version": 1,
        "rule": "eccv",
        "path": "/x",
        "manifest": {},
    }
    values.update(fields)
    return Release.objects.create(**values)


def test_release_version_starts_at_one(world):
    assert_refused("release_version_positive", lambda: release(world, version=0))
    release(world, version=1)


def test_release_version_is_unique_per_name(world):
    release(world)
    release(world, name="other")
    assert_refused("release_unique_version", lambda: release(world))


def test_the_migration_confirms_the_mturk_work_that_mturk_had_already_listed(world):
    from django.apps import apps

    migration = importlib.import_module("annotation.migrations.0004_assignment_confirmed_at")
    offline = Batch.objects.create(dataset=world.dataset, name="csv", config=world.batch.config)
    offline_hit = HIT.objects.create(batch=offline, index=0)
    Batch.objects.filter(pk=world.batch.pk).update(
        mturk={"environment": "sandbox", "sent": {"3LISTED": {"decision": "approved"}}}
    )
    done = timezone.now()

    def mturk_work(hit: HIT, aid: str, **fields: object) -> Assignment:
        worker = Worker.objects.create(source="mturk", external_id=f"A{aid}")
        return Assignment.objects.create(hit=hit, worker=worker, external_id=aid, **fields)

    listed = mturk_work(world.hit, "3LISTED", status="approved", submitted_at=done)
    unlisted = mturk_work(world.hit, "3UNLISTED", status="approved", submitted_at=done)
    from_csv = mturk_work(offline_hit, "3FROMCSV", status="submitted", submitted_at=done)

    migration.confirm_known_mturk_work(apps, None)

    confirmed = dict(Assignment.objects.values_list("pk", "confirmed_at"))
    assert confirmed[listed.pk] == confirmed[from_csv.pk] == done
    assert confirmed[unlisted.pk] is None  # approved by hand: uncounted until a sync finds it
    assert confirmed[world.assignment.pk] is None  # platform work needs no confirmation
