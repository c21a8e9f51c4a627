"""Invalid captions: the review list of original pairs judged "100% NO", marking, the command."""

from __future__ import annotations

import json
from collections import Counter
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import IntegrityError, transaction

from annotation.errors import ServiceError
from annotation.handout import assignment_create
from annotation.models import HIT, Batch, Caption, HITItem, Judgement, Worker
from annotation.submissions import AnswerInput, assignment_submit
from pipeline.invalid_captions import (
    caption_mark_invalid,
    caption_unmark_invalid,
    invalid_captions_review,
)
from pipeline.stages import batch_run_until


def to_annotating(batch: Batch) -> Batch:
    assert batch_run_until(batch_id=batch.pk, until="annotating") == "annotating"
    return batch


def answer_everything(hit: HIT, worker: Worker, level: str) -> None:
    assignment = assignment_create(hit=hit, worker=worker)
    answers = [
        AnswerInput(item_id=pk, level=level) for pk in hit.items.values_list("pk", flat=True)
    ]
    assignment_submit(assignment=assignment, answers=answers, followups_required=True)


def own_image_tally() -> dict[int, tuple[int, int]]:
    """(answers, "100% NO") per caption shown with its own image, counted one by one."""
    answers: Counter[int] = Counter()
    no: Counter[int] = Counter()
    for judgement in Judgement.objects.select_related("item__caption"):
        if judgement.item.image_id == judgement.item.caption.image_id:
            answers[judgement.item.caption_id] += 1
            no[judgement.item.caption_id] += judgement.level == "no"
    return {pk: (answers[pk], no[pk]) for pk in answers}


@pytest.fixture
def naysaid(batch) -> Batch:
    """Two workers answer "100% NO" to every pair of the first two HITs, goldens included."""
    to_annotating(batch)
    hits = list(HIT.objects.filter(batch=batch).order_by("index")[:2])
    for name in ("naysayer", "grump"):
        worker = Worker.objects.create(source="platform", external_id=name)
        for hit in hits:
            answer_everything(hit, worker, "no")
    return batch


def test_original_pairs_judged_100_percent_no_are_listed_with_their_counts(naysaid):
    rows = invalid_captions_review()
    tally = own_image_tally()
    assert rows, "the golden TPs answered NO are original positives"
    assert {row.caption.pk for row in rows} == {pk for pk, (_, no) in tally.items() if no >= 1}
    for row in rows:
        assert (row.answers, row.no_answers) == tally[row.caption.pk]
        assert row.no_share == row.no_answers / row.answers
    golden_tp_captions = set(
        HITItem.objects.filter(
            hit__batch=naysaid, hit__index__in=[0, 1], role="golden_tp"
        ).values_list("caption_id", flat=True)
    )
    assert golden_tp_captions <= {row.caption.pk for row in rows}


def test_the_list_puts_the_most_100_percent_no_first(naysaid):
    rows = invalid_captions_review()
    keys = [(-row.no_answers, -row.no_share) for row in rows]
    assert keys == sorted(keys)


def test_a_pair_with_a_foreign_image_never_makes_the_list(naysaid):
    listed = {row.caption.pk for row in invalid_captions_review()}
    foreign_only = set(
        Judgement.objects.filter(level="no")
        .exclude(item__caption__in=listed)
        .values_list("item__caption_id", flat=True)
    )
    assert foreign_only  # plenty of "100% NO" on foreign pairs …
    assert not foreign_only & listed  # … and none of them is listed


def test_min_no_and_the_dataset_filter_narrow_the_list(naysaid, dataset):
    assert all(row.no_answers >= 2 for row in invalid_captions_review(min_no=2))
    assert len(invalid_captions_review(min_no=2)) <= len(invalid_captions_review())
    assert invalid_captions_review(dataset=dataset) == invalid_captions_review()
    with pytest.raises(ServiceError, match="at least 1"):
        invalid_captions_review(min_no=0)


def test_nothing_is_listed_before_anyone_answers(batch):
    to_annotating(batch)
    assert invalid_captions_review() == []


def test_marking_records_the_reason_and_time_and_keeps_the_caption_on_the_list(dataset):
    caption = Caption.objects.filter(dataset=dataset).order_by("pk").first()
    caption_mark_invalid(caption=caption, reason="wrong_for_image")
    caption.refresh_from_db()
    assert (caption.is_invalid, caption.invalid_reason) == (True, "wrong_for_image")
    assert caption.invalid_marked_at is not None
    rows = invalid_captions_review()
    assert [(row.caption.pk, row.answers) for row in rows] == [(caption.pk, 0)]  # to unmark it
    assert invalid_captions_review(include_marked=False) == []


def test_unmarking_makes_a_caption_valid_again(dataset):
    caption = Caption.objects.filter(dataset=dataset).first()
    caption_mark_invalid(caption=caption, reason="meaningless")
    caption_unmark_invalid(caption=caption)
    caption.refresh_from_db()
    assert (caption.is_invalid, caption.invalid_reason, caption.invalid_marked_at) == (
        False,
        "",
        None,
    )


def test_an_unknown_reason_is_refused_and_the_database_requires_one(dataset):
    caption = Caption.objects.filter(dataset=dataset).first()
    with pytest.raises(ServiceError, match="meaningless, wrong_for_image"):
        caption_mark_invalid(caption=caption, reason="ugly")
    caption.refresh_from_db()
    assert caption.is_invalid is False
    with pytest.raises(IntegrityError), transaction.atomic():
        Caption.objects.filter(pk=caption.pk).update(is_invalid=True, invalid_reason="")


# --- the command ---------------------------------------------------------------------------


def run(*args: str) -> str:
    out = StringIO()
    call_command("caption_invalid", *args, stdout=out)
    return out.getvalue()


def test_the_command_lists_marks_and_unmarks(naysaid, dataset):
    rows = invalid_captions_review()
    top = rows[0].caption
    listed = run("list")
    assert f"small caption {top.ext_id} (image {top.image.ext_id}): " in listed
    assert f'{rows[0].no_answers}/{rows[0].answers} "100% NO", valid' in listed

    assert run("mark", "small", str(top.ext_id), "--reason", "meaningless") == (
        f"caption {top.ext_id} marked invalid (meaningless)\n"
    )
    entries = [
        json.loads(line) for line in run("list", "--json", "--dataset", "small").splitlines()
    ]
    assert {"caption_id": top.ext_id, "invalid": "meaningless"}.items() <= next(
        e for e in entries if e["caption_id"] == top.ext_id
    ).items()

    assert run("unmark", "small", str(top.ext_id)) == f"caption {top.ext_id} is valid again\n"
    top.refresh_from_db()
    assert top.is_invalid is False


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["mark", "nope", "1", "--reason", "meaningless"], "no dataset 'nope'"),
        (["mark", "small", "999999", "--reason", "meaningless"], "has no caption 999999"),
        (["mark", "small", "1", "--reason", "ugly"], "invalid choice"),
        (["list", "--dataset", "nope"], "no dataset 'nope'"),
        (["list", "--min-no", "0"], "at least 1"),
    ],
)
def test_the_command_turns_bad_input_into_clear_errors(dataset, args, message):
    with pytest.raises(CommandError, match=message):
        run(*args)
    assert not Caption.objects.filter(is_invalid=True).exists()


def test_the_command_says_when_the_list_is_empty(dataset):
    assert run("list") == 'no caption was judged "100% NO" for its own image\n'
