"""A batch's qualification round: its pool (drawn or chosen), a worker's tries (each with
pairs of its own) and answers with feedback, the exact pass mark, and the hand-out that
waits for a pass.

The `tiny` dataset (twelve images, caption 100 + i belongs to image i) carries batches
built by hand; the draw runs on the small synthetic batch built by the real pipeline.
"""

from __future__ import annotations

from functools import partial

import pytest
from django.db import connection

from annotation.errors import ServiceError
from annotation.goldens import golden_pool
from annotation.handout import assignment_create, hit_assign_next
from annotation.models import (
    HIT,
    BatchState,
    Caption,
    HITItem,
    QualificationAnswer,
    QualificationAttempt,
    QualificationPair,
    Query,
    Ranking,
    Worker,
)
from annotation.qualification.attempts import (
    AnswerFeedback,
    qualification_answer_feedback,
    qualification_answer_record,
    qualification_attempt_open,
    qualification_pair_next,
    qualification_progress,
    qualification_status,
)
from annotation.qualification.pairs import (
    QualificationPairError,
    QualificationPairInput,
    qualification_pairs_draw,
    qualification_pairs_parse,
    qualification_pairs_set,
)
from annotation.review import worker_block
from mitl.config import batch_config
from mitl.hits import Role, golden_replacement
from mitl.qualification import NEGATIVE_NOTE, PLAIN_NOTE, POSITIVE_NOTE, QualificationStatus
from pipeline.build import hits_build
from pipeline.progress import StageTracker

from .crowd_factories import T0, all_at_once, batch_make, hit_make, worker_make

pytestmark = pytest.mark.django_db

# Ten pairs off every HIT page of `hit_make` (a HIT at index 0 shows image i with caption
# 100 + 2i + 1, i < 5): six images with their own captions (YES), four with another's (NO):
# the pool of a round of five pairs a try (3 YES, 2 NO) and two tries.
TEN = [
    QualificationPairInput(5, 105, True, "Its own caption."),
    QualificationPairInput(6, 111, False, "A caption of image 11."),
    QualificationPairInput(7, 107, True),
    QualificationPairInput(8, 104, False),
    QualificationPairInput(9, 109, True),
    QualificationPairInput(10, 110, True),
    QualificationPairInput(11, 111, True),
    QualificationPairInput(6, 106, True),
    QualificationPairInput(10, 101, False),
    QualificationPairInput(11, 102, False),
]
RIGHT = {True: "yes", False: "no"}
WRONG = {True: "no", False: "weak_yes"}


@pytest.fixture
def gated(tiny):
    """An annotating batch with a round of five pairs a try (pass 0.8, two tries), a pool of
    ten, and one HIT."""
    batch = batch_make(tiny, qualification_pairs=5, qualification_pass=0.8)
    hit_make(batch, 0)
    qualification_pairs_set(batch=batch, pairs=TEN)
    return batch


def answer_all(attempt, wrong: int = 0) -> list[AnswerFeedback]:
    """Answer every pair of the try in order, the first `wrong` of them wrongly."""
    return [feedback for _, feedback in answer_pairs(attempt, wrong)]


def answer_pairs(attempt, wrong: int = 0) -> list[tuple[QualificationPair, AnswerFeedback]]:
    """Answer every pair of the try in order, the first `wrong` of them wrongly; return each
    pair shown with the feedback the worker read."""
    given = []
    while (pair := qualification_pair_next(attempt=attempt)) is not None:
        levels = WRONG if len(given) < wrong else RIGHT
        feedback = qualification_answer_record(
            attempt=attempt, pair_id=pair.pk, level=levels[pair.positive], elapsed_ms=1500
        )
        given.append((pair, feedback))
    return given


def take_round(batch, worker, wrong: int = 0) -> QualificationAttempt:
    attempt = qualification_attempt_open(batch=batch, worker=worker)
    answer_all(attempt, wrong=wrong)
    attempt.refresh_from_db()
    return attempt


# --- drawn pairs ---------------------------------------------------------------------------


@pytest.fixture
def small_config(small_config):
    return {**small_config, "qualification_pairs": 7, "qualification_attempts": 3}


def test_building_the_hits_draws_the_pool_as_golden_pairs_are_drawn(annotating_batch):
    batch = annotating_batch
    pairs = list(
        QualificationPair.objects.filter(batch=batch).select_related("caption").order_by("position")
    )

    # Seven pairs a try (4 matches + 3 mismatches), three tries, each with fresh pairs.
    assert [p.position for p in pairs] == list(range(21))
    assert sum(p.positive for p in pairs) == 12
    assert {p.source for p in pairs} == {"golden"}
    assert not any(p.mturk_test for p in pairs)
    for pair in pairs:
        # A match is an original pair (the caption's own image); a mismatch is not.
        assert (pair.caption.image_id == pair.image_id) is pair.positive
        assert not pair.caption.is_invalid
        assert pair.note == (POSITIVE_NOTE if pair.positive else NEGATIVE_NOTE)
    on_pages = set(HITItem.objects.filter(hit__batch=batch).values_list("image_id", "caption_id"))
    assert not on_pages & {(p.image_id, p.caption_id) for p in pairs}
    assert len({(p.image_id, p.caption_id) for p in pairs}) == 21


def test_a_pool_short_of_pairs_is_filled_by_drawing_again(annotating_batch):
    # A pool made before pools (one try's worth), or before the tries were raised.
    pool = QualificationPair.objects.filter(batch=annotating_batch)
    kept = set(pool.order_by("position")[:7].values_list("pk", flat=True))
    pool.exclude(pk__in=kept).delete()

    assert qualification_pairs_draw(batch=annotating_batch) == 21 - 7

    assert set(pool.values_list("pk", flat=True)) >= kept  # the old pairs stay
    assert pool.count() == 21 and pool.filter(positive=True).count() == 12
    assert len(set(pool.values_list("image_id", "caption_id"))) == 21


def test_a_drawn_mismatch_is_outside_every_annotators_top_ranks_for_its_query(annotating_batch):
    depth = batch_config(annotating_batch).golden_negative_depth
    top = {}
    for query_id, targets in Ranking.objects.filter(query__batch=annotating_batch).values_list(
        "query_id", "targets"
    ):
        top.setdefault(query_id, set()).update(targets[:depth])
    queries = list(Query.objects.filter(batch=annotating_batch))
    for pair in QualificationPair.objects.filter(batch=annotating_batch, positive=False):
        # The pair is one query's item with a target that no annotator ranks high for it.
        fits = [
            q
            for q in queries
            if (q.image_id == pair.image_id and pair.caption_id not in top.get(q.pk, ()))
            or (q.caption_id == pair.caption_id and pair.image_id not in top.get(q.pk, ()))
        ]
        assert fits, f"{pair} is no query's low-ranked target"


def test_drawing_again_draws_nothing_and_keeps_the_pairs(annotating_batch):
    before = list(QualificationPair.objects.filter(batch=annotating_batch).values())

    assert qualification_pairs_draw(batch=annotating_batch) == 0
    # A later adaptive round builds more HITs; the round keeps the first draw.
    annotating_batch.round = 1
    hits_build(
        batch=annotating_batch,
        config=batch_config(annotating_batch),
        tracker=StageTracker(batch=annotating_batch, stage=BatchState.BUILDING),
    )

    assert list(QualificationPair.objects.filter(batch=annotating_batch).values()) == before


def test_goldens_drawn_after_the_round_never_show_its_pairs(gated):
    # A later round's HITs and a suspended golden's replacement are drawn from the pool;
    # a practice pair there would show a worker a golden whose answer the round told them.
    # The whole pool counts, not only the pairs some try has shown so far.
    take_round(gated, worker_make("ann"))
    practice = set(
        QualificationPair.objects.filter(batch=gated).values_list("image_id", "caption_id")
    )
    pool = golden_pool(batch_id=gated.pk, dataset_id=gated.dataset_id)
    drawn = {
        golden_replacement(Role.GOLDEN_TP, pool=pool, queries=[], on_page=set(), seed=[seed])
        for seed in range(60)
    }
    # Twelve original pairs, six of them in the pool (its matches, three of them never
    # shown yet): drawn from all twelve, 60 draws would miss the six only with chance
    # 0.5^60.
    assert len(drawn) == 6
    assert not {(spec.image_id, spec.caption_id) for spec in drawn} & practice
    assert len(pool.golden_tp_pairs) == 6


def test_golden_negatives_avoid_the_rounds_mismatches(annotating_batch):
    pool = golden_pool(batch_id=annotating_batch.pk, dataset_id=annotating_batch.dataset_id)
    pairs = list(QualificationPair.objects.filter(batch=annotating_batch))
    assert not {(p.image_id, p.caption_id) for p in pairs} & set(pool.golden_tp_pairs)
    avoided = 0
    for pair in (p for p in pairs if not p.positive):
        for source in pool.negatives.values():
            if source.direction == "i2t" and source.item_id == pair.image_id:
                assert pair.caption_id in source.excluded
                avoided += 1
            if source.direction == "t2i" and source.item_id == pair.caption_id:
                assert pair.image_id in source.excluded
                avoided += 1
    assert avoided >= 9  # each of the nine mismatches was drawn for a query of the batch


def test_the_same_seed_draws_the_same_round(annotating_batch):
    first = list(
        QualificationPair.objects.filter(batch=annotating_batch)
        .order_by("position")
        .values_list("image_id", "caption_id", "positive")
    )
    QualificationPair.objects.filter(batch=annotating_batch).delete()

    assert qualification_pairs_draw(batch=annotating_batch) == 21
    again = QualificationPair.objects.filter(batch=annotating_batch).order_by("position")
    assert list(again.values_list("image_id", "caption_id", "positive")) == first


def test_a_batch_without_a_round_or_without_hits_draws_none(tiny):
    plain = batch_make(tiny)
    hit_make(plain, 0)
    assert qualification_pairs_draw(batch=plain) == 0

    early = batch_make(tiny, qualification_pairs=4, state=BatchState.BUILDING)
    with pytest.raises(ServiceError, match="no HITs yet"):
        qualification_pairs_draw(batch=early)
    assert not QualificationPair.objects.exists()


# --- pairs an admin chose ------------------------------------------------------------------


def test_admin_pairs_replace_the_pool_in_their_order(gated):
    pairs = QualificationPair.objects.filter(batch=gated).order_by("position")
    assert [(p.image.ext_id, p.caption.ext_id, p.positive) for p in pairs] == [
        (pair.image_ext_id, pair.caption_ext_id, pair.positive) for pair in TEN
    ]
    assert {p.source for p in pairs} == {"admin"}
    assert pairs[0].note == "Its own caption."

    more = [*TEN, QualificationPairInput(3, 103, True), QualificationPairInput(3, 110, False)]
    assert qualification_pairs_set(batch=gated, pairs=more) == 12
    assert QualificationPair.objects.filter(batch=gated).count() == 12


@pytest.mark.parametrize(
    ("pairs", "message"),
    [
        # One try's worth: a second try would show pairs the first try's feedback told.
        (TEN[:5], r"needs at least 6 YES and 4 NO pairs \(5 pairs x 2 tries\); it has 3 YES"),
        # Enough pairs, the wrong mix: a try would run out of NO pairs.
        (
            [p for p in TEN if p.positive] + TEN[1:4:2] + [QualificationPairInput(3, 103, True)],
            r"needs at least 6 YES and 4 NO pairs .*it has 7 YES and 2 NO",
        ),
    ],
)
def test_a_pool_too_small_for_every_try_is_refused(gated, pairs, message):
    with pytest.raises(ServiceError, match="too few qualification pairs: each try shows 5 pairs"):
        qualification_pairs_set(batch=gated, pairs=pairs)
    with pytest.raises(ServiceError, match=message):
        qualification_pairs_set(batch=gated, pairs=pairs)
    assert QualificationPair.objects.filter(batch=gated).count() == 10  # nothing changed


@pytest.mark.parametrize(
    ("pair", "message"),
    [
        (QualificationPairInput(99, 105, True), "pair 11: the batch's dataset has no image 99"),
        (QualificationPairInput(5, 199, True), "pair 11: the batch's dataset has no caption 199"),
        (QualificationPairInput(0, 101, False), "pair 11: image 0 with caption 101 is on a HIT"),
        (QualificationPairInput(5, 105, False), "pair 11: image 5 with caption 105 is pair 1"),
    ],
)
def test_admin_pairs_are_checked_against_the_dataset_and_the_hit_pages(gated, pair, message):
    with pytest.raises(QualificationPairError, match=message) as refused:
        qualification_pairs_set(batch=gated, pairs=[*TEN, pair])
    assert refused.value.index == 10
    assert QualificationPair.objects.filter(batch=gated).count() == 10  # nothing changed


def test_an_invalid_caption_cannot_be_a_pair(gated):
    Caption.objects.filter(ext_id=110).update(is_invalid=True, invalid_reason="meaningless")
    with pytest.raises(ServiceError, match="caption 110 is marked invalid"):
        qualification_pairs_set(batch=gated, pairs=TEN)


def test_admin_pairs_need_a_round_built_hits_and_no_try_started(tiny, gated):
    plain = batch_make(tiny)
    with pytest.raises(ServiceError, match="has no qualification round"):
        qualification_pairs_set(batch=plain, pairs=TEN)
    early = batch_make(tiny, qualification_pairs=5, state=BatchState.BUILDING)
    with pytest.raises(ServiceError, match="has no HITs yet: choose its qualification pairs"):
        qualification_pairs_set(batch=early, pairs=TEN)

    qualification_attempt_open(batch=gated, worker=worker_make("ann"))
    with pytest.raises(ServiceError, match=r"round has started \(1 tries so far\)"):
        qualification_pairs_set(batch=gated, pairs=TEN[::-1])
    assert QualificationPair.objects.filter(batch=gated).count() == 10


def test_a_pairs_file_reads_answers_and_notes_and_names_bad_lines():
    pairs, lines = qualification_pairs_parse(
        ["image_id,caption_id,answer,note\n", "5,105,YES,own\n", "\n", "6,111, no ,\n"]
    )
    assert pairs == [
        QualificationPairInput(5, 105, True, "own"),
        QualificationPairInput(6, 111, False, ""),
    ]
    assert lines == [2, 4]
    with pytest.raises(ServiceError, match="line 3: answer must be yes or no"):
        qualification_pairs_parse(["image_id,caption_id,answer\n", "5,105,yes\n", "6,111,maybe"])
    with pytest.raises(ServiceError, match="line 2: image_id and caption_id must be whole"):
        qualification_pairs_parse(["image_id,caption_id,answer\n", "five,105,yes\n"])
    with pytest.raises(ServiceError, match=r"line 1: .*\(missing: answer\)"):
        qualification_pairs_parse(["image_id,caption_id\n", "5,105\n"])


# --- tries and answers ---------------------------------------------------------------------


def test_a_worker_sees_feedback_after_each_answer_and_passes_at_four_of_five(gated):
    worker = worker_make("ann")
    attempt = qualification_attempt_open(batch=gated, worker=worker)

    shown = answer_pairs(attempt, wrong=1)
    feedback = [f for _, f in shown]

    for pair, said in shown:
        assert said.expected_positive == pair.positive
        assert said.note == (pair.note or PLAIN_NOTE[pair.positive])
    first = feedback[0]
    assert (first.correct, first.answered, first.correct_count) == (False, 1, 0)
    assert (first.total, first.finished, first.passed) == (5, False, None)
    assert [f.correct_count for f in feedback] == [0, 1, 2, 3, 4]
    last = feedback[-1]
    assert (last.finished, last.passed, last.answered, last.correct_count) == (True, True, 5, 4)
    attempt.refresh_from_db()
    assert (attempt.correct, attempt.answered, attempt.passed) == (4, 5, True)
    assert attempt.finished_at is not None
    assert qualification_status(worker=worker, batch=gated) == QualificationStatus.QUALIFIED
    answers = QualificationAnswer.objects.filter(attempt=attempt)
    assert sorted(answers.values_list("elapsed_ms", flat=True)) == [1500] * 5


def test_three_of_five_fails_and_a_second_try_may_pass(gated):
    worker = worker_make("ann")
    first = take_round(gated, worker, wrong=2)
    assert (first.correct, first.passed, first.number) == (3, False, 1)
    progress = qualification_progress(worker=worker, batch=gated)
    assert (progress.status, progress.attempts_used, progress.attempts_left) == ("open", 1, 1)

    second = take_round(gated, worker, wrong=0)
    assert (second.correct, second.passed, second.number) == (5, True, 2)
    assert qualification_status(worker=worker, batch=gated) == QualificationStatus.QUALIFIED
    with pytest.raises(ServiceError, match=r"passed the qualification round of batch \d+ already"):
        qualification_attempt_open(batch=gated, worker=worker)


def test_a_second_try_shows_no_pair_whose_answer_the_first_told(gated):
    # Failing on purpose and replaying the feedback passed the second try when both tries
    # showed the same pairs in the same order.
    worker = worker_make("ann")
    first = qualification_attempt_open(batch=gated, worker=worker)
    told = {pair.pk: said.expected_positive for pair, said in answer_pairs(first, wrong=5)}
    first.refresh_from_db()
    assert (first.correct, first.passed) == (0, False)

    second = qualification_attempt_open(batch=gated, worker=worker)

    assert len(second.pair_ids) == 5 and not set(second.pair_ids) & set(told)
    pool = set(QualificationPair.objects.filter(batch=gated).values_list("pk", flat=True))
    assert set(first.pair_ids) | set(second.pair_ids) == pool  # a pool of 5 x 2 tries
    # Replaying the first try's feedback answers nothing of the second: its pairs are new.
    while (pair := qualification_pair_next(attempt=second)) is not None:
        assert pair.pk not in told
        qualification_answer_record(attempt=second, pair_id=pair.pk, level="no")
    second.refresh_from_db()
    assert second.finished_at is not None and second.correct == 2  # its two NO pairs


def test_each_try_shows_the_rounds_mix_in_an_order_of_its_own(gated):
    tries = [qualification_attempt_open(batch=gated, worker=worker_make(f"w{n}")) for n in range(8)]
    positive = dict(QualificationPair.objects.filter(batch=gated).values_list("pk", "positive"))

    for attempt in tries:
        assert sorted(positive[pk] for pk in attempt.pair_ids) == [False, False, True, True, True]
    # Neither the pairs nor their order are fixed: eight workers' first tries, drawn from
    # C(6,3) x C(4,2) x 5! orders, would all match by chance about once in 10^30.
    assert len({tuple(attempt.pair_ids) for attempt in tries}) > 1
    assert len({pk for attempt in tries for pk in attempt.pair_ids}) > 5


def test_an_answer_to_a_pool_pair_outside_the_try_is_refused(gated):
    attempt = qualification_attempt_open(batch=gated, worker=worker_make("ann"))
    elsewhere = QualificationPair.objects.filter(batch=gated).exclude(pk__in=attempt.pair_ids)[0]

    with pytest.raises(ServiceError, match="is not in your try 1"):
        qualification_answer_record(attempt=attempt, pair_id=elsewhere.pk, level="yes")
    assert not QualificationAnswer.objects.exists()


def test_a_try_with_no_fresh_pairs_left_is_refused_until_the_pool_is_filled(gated):
    # A pool of one try's worth, from before pools.
    keep = [p.pk for p in QualificationPair.objects.filter(batch=gated).order_by("position")[:5]]
    QualificationPair.objects.filter(batch=gated).exclude(pk__in=keep).delete()
    worker = worker_make("ann")
    take_round(gated, worker, wrong=5)

    with pytest.raises(ServiceError, match=r"no fresh pairs left for your try 2.*--draw"):
        qualification_attempt_open(batch=gated, worker=worker)
    assert QualificationAttempt.objects.filter(worker=worker).count() == 1


def test_a_worker_out_of_tries_has_failed_for_good(gated):
    worker = worker_make("ann")
    take_round(gated, worker, wrong=5)
    take_round(gated, worker, wrong=2)

    assert qualification_status(worker=worker, batch=gated) == QualificationStatus.FAILED
    with pytest.raises(ServiceError, match=r"no tries left \(of 2\)"):
        qualification_attempt_open(batch=gated, worker=worker)
    assert QualificationAttempt.objects.filter(worker=worker).count() == 2


def test_opening_again_resumes_the_unfinished_try(gated):
    worker = worker_make("ann")
    attempt = qualification_attempt_open(batch=gated, worker=worker)
    pair = qualification_pair_next(attempt=attempt)
    qualification_answer_record(attempt=attempt, pair_id=pair.pk, level="yes")

    again = qualification_attempt_open(batch=gated, worker=worker)

    assert again.pk == attempt.pk
    assert qualification_pair_next(attempt=again).pk == attempt.pair_ids[1]
    assert qualification_progress(worker=worker, batch=gated).in_progress.pk == attempt.pk


def test_answering_a_pair_again_keeps_the_first_answer(gated):
    attempt = qualification_attempt_open(batch=gated, worker=worker_make("ann"))
    pair = qualification_pair_next(attempt=attempt)

    first = qualification_answer_record(
        attempt=attempt, pair_id=pair.pk, level=WRONG[pair.positive]
    )
    again = qualification_answer_record(
        attempt=attempt, pair_id=pair.pk, level=RIGHT[pair.positive]
    )

    assert again == first
    assert (first.correct, first.answered) == (False, 1)
    assert QualificationAnswer.objects.filter(attempt=attempt).count() == 1
    attempt.refresh_from_db()
    assert (attempt.answered, attempt.correct) == (1, 0)
    assert qualification_answer_feedback(attempt=attempt, pair_id=pair.pk) == first


def test_the_last_answer_repeated_after_the_try_ended_returns_its_feedback(gated):
    attempt = qualification_attempt_open(batch=gated, worker=worker_make("ann"))
    feedback = answer_all(attempt)
    last_pair = QualificationPair.objects.get(pk=attempt.pair_ids[-1])

    repeated = qualification_answer_record(attempt=attempt, pair_id=last_pair.pk, level="no")

    assert repeated == feedback[-1]
    assert (repeated.finished, repeated.passed) == (True, True)


def test_answers_are_refused_for_an_unknown_level_or_a_pair_of_another_batch(tiny, gated):
    other = batch_make(tiny, qualification_pairs=1, qualification_attempts=1)
    hit_make(other, 0)
    qualification_pairs_set(batch=other, pairs=[QualificationPairInput(11, 111, True)])
    attempt = qualification_attempt_open(batch=gated, worker=worker_make("ann"))
    pair = qualification_pair_next(attempt=attempt)

    with pytest.raises(ServiceError, match="unknown answer 'maybe'"):
        qualification_answer_record(attempt=attempt, pair_id=pair.pk, level="maybe")
    foreign = QualificationPair.objects.get(batch=other)
    with pytest.raises(ServiceError, match="is not in your try 1 of the qualification round"):
        qualification_answer_record(attempt=attempt, pair_id=foreign.pk, level="yes")
    assert not QualificationAnswer.objects.exists()


def test_a_try_is_refused_without_round_pairs_open_batch_or_for_a_blocked_worker(tiny, gated):
    worker = worker_make("ann")
    with pytest.raises(ServiceError, match="has no qualification round"):
        qualification_attempt_open(batch=batch_make(tiny), worker=worker)
    empty = batch_make(tiny, qualification_pairs=3)
    with pytest.raises(ServiceError, match=r"no qualification pairs yet.*--draw"):
        qualification_attempt_open(batch=empty, worker=worker)
    closed = batch_make(tiny, qualification_pairs=3, state=BatchState.AGGREGATING)
    with pytest.raises(ServiceError, match="is aggregating, not taking answers"):
        qualification_attempt_open(batch=closed, worker=worker)
    worker_block(worker=worker, blocked=True)
    with pytest.raises(ServiceError, match="blocked"):
        qualification_attempt_open(batch=gated, worker=worker)
    assert not QualificationAttempt.objects.exists()


def test_a_batch_without_a_round_needs_no_qualification(tiny):
    assert qualification_status(worker=worker_make("ann"), batch=batch_make(tiny)) == (
        QualificationStatus.NOT_REQUIRED
    )


# --- the hand-out waits for a pass ---------------------------------------------------------


def test_next_hit_skips_a_batch_whose_round_the_worker_has_not_passed(tiny, gated):
    open_batch = batch_make(tiny)  # a later batch: the hand-out prefers the older one
    open_hit = hit_make(open_batch, 0)
    worker = worker_make("ann")

    first = hit_assign_next(worker=worker, now=T0)

    assert first.hit == open_hit  # not the older gated batch's HIT
    take_round(gated, worker)
    first.status = "expired"  # done with it: the next request takes a new HIT
    first.save(update_fields=["status"])
    second = hit_assign_next(worker=worker, now=T0)
    assert second.hit.batch == gated


def test_a_worker_not_yet_qualified_gets_no_hit_of_that_batch(gated):
    worker = worker_make("ann")
    assert hit_assign_next(worker=worker, now=T0) is None
    take_round(gated, worker, wrong=2)  # failed: still closed
    assert hit_assign_next(worker=worker, now=T0) is None
    assert not HIT.objects.filter(assignments__isnull=False).exists()


@pytest.mark.parametrize("source", ["platform", "simulated"])
def test_assignment_create_tells_an_unqualified_worker_to_take_the_round(gated, source):
    worker = Worker.objects.create(source=source, external_id="w")
    hit = gated.hits.get()
    with pytest.raises(ServiceError, match="take the qualification round first"):
        assignment_create(hit=hit, worker=worker, now=T0)

    take_round(gated, worker)
    assert assignment_create(hit=hit, worker=worker, now=T0).worker == worker


def test_mturk_workers_are_left_to_mturks_qualification_requirement(gated):
    worker = Worker.objects.create(source="mturk", external_id="A1TURKER")
    hit = gated.hits.get()

    assert hit_assign_next(worker=worker, now=T0).hit == hit
    assert assignment_create(hit=hit_make(gated, 1), worker=worker, now=T0).worker == worker


# --- two tabs at once (PostgreSQL) ---------------------------------------------------------


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_simultaneous_starts_of_one_worker_share_one_try(tiny):
    assert connection.vendor == "postgresql"
    batch = batch_make(tiny, qualification_pairs=5)
    hit_make(batch, 0)
    qualification_pairs_set(batch=batch, pairs=TEN)
    worker = worker_make("two-tabs")

    def start(worker_id: int) -> QualificationAttempt:
        return qualification_attempt_open(batch=batch, worker=Worker.objects.get(pk=worker_id))

    outcomes = all_at_once([partial(start, worker.pk)] * 8)

    assert all(isinstance(o, QualificationAttempt) for o in outcomes), outcomes
    assert QualificationAttempt.objects.filter(worker=worker).count() == 1
