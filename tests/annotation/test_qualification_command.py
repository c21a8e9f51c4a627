"""`batch_qualification`: draw, set from a CSV file (all or nothing, errors name the line),
and show a batch's qualification round."""

from __future__ import annotations

import re
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from annotation.models import QualificationPair
from annotation.qualification.attempts import qualification_attempt_open
from annotation.qualification.pairs import QualificationPairInput, qualification_pairs_set

from .crowd_factories import batch_make, hit_make, worker_make

pytestmark = pytest.mark.django_db


# A pool for two pairs a try (1 YES, 1 NO) and two tries.
POOL = [
    QualificationPairInput(7, 107, True),
    QualificationPairInput(9, 109, True),
    QualificationPairInput(8, 104, False),
    QualificationPairInput(6, 111, False),
]


@pytest.fixture
def gated(tiny):
    batch = batch_make(tiny, qualification_pairs=2, qualification_pass=0.75)
    hit_make(batch, 0)  # shows (0, 101), (1, 103), (2, 105), (3, 107), (4, 109)
    return batch


def run(*args: str) -> str:
    out = StringIO()
    call_command("batch_qualification", *args, stdout=out)
    return out.getvalue()


def write(tmp_path, text: str):
    path = tmp_path / "pairs.csv"
    path.write_text(text)
    return str(path)


def test_a_csv_file_sets_the_pairs_and_show_lists_them(gated, tmp_path):
    path = write(
        tmp_path,
        "image_id,caption_id,answer,note\n5,105,yes,Its own caption.\n6,111,no,\n"
        "7,107,yes,\n8,104,no,\n",
    )

    assert run(str(gated.pk), "--pairs", path) == f"batch {gated.pk}: 4 qualification pairs set\n"

    shown = run(str(gated.pk))
    assert (
        f"batch {gated.pk}: 2 qualification pairs a try, pass mark 75%, 2 tries per worker; "
        "pool 4 pairs (needs 4), MTurk's test 0"
    ) in shown
    assert "image 5  caption 105  yes  admin" in shown
    assert "image 6  caption 111  no   admin" in shown
    assert "tries: 0 (0 in progress); workers passed 0, failed 0; pass rate -" in shown


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("image_id,caption_id,answer\n5,105,yes\n6,111,perhaps\n", "line 3: answer must be yes"),
        (
            "image_id,caption_id,answer\n5,105,yes\n\n0,101,no\n7,107,yes\n8,104,no\n",
            "line 4: image 0 with caption",
        ),
        (
            "image_id,caption_id,answer\n5,105,yes\n6,999,no\n7,107,yes\n8,104,no\n",
            "line 3: the batch's dataset has",
        ),
        ("image,caption\n5,105\n", "line 1: the header must name image_id,caption_id,answer"),
    ],
)
def test_a_bad_row_names_its_line_and_changes_nothing(gated, tmp_path, text, message):
    qualification_pairs_set(batch=gated, pairs=POOL)
    path = write(tmp_path, text)

    with pytest.raises(CommandError, match=re.escape(f"{path} {message}")):
        run(str(gated.pk), "--pairs", path)

    assert sorted(QualificationPair.objects.values_list("image__ext_id", flat=True)) == [6, 7, 8, 9]


def test_a_file_too_small_for_every_try_is_refused_with_the_numbers(gated, tmp_path):
    qualification_pairs_set(batch=gated, pairs=POOL)
    path = write(tmp_path, "image_id,caption_id,answer\n5,105,yes\n6,111,no\n")

    message = (
        f"batch {gated.pk}: too few qualification pairs: each try shows 2 pairs (1 YES, 1 NO) "
        "that no earlier try of the worker showed, in up to 2 tries, so the pool needs at "
        "least 2 YES and 2 NO pairs (2 pairs x 2 tries); it has 1 YES and 1 NO"
    )
    with pytest.raises(CommandError, match=re.escape(message)):
        run(str(gated.pk), "--pairs", path)
    assert QualificationPair.objects.count() == 4


def test_a_file_that_is_not_utf8_is_refused_with_a_reason(gated, tmp_path):
    path = tmp_path / "pairs.csv"
    path.write_bytes("image_id,caption_id,answer,note\n5,105,yes,café\n".encode("latin-1"))

    message = f"{path} is not UTF-8 text: save it as CSV UTF-8"
    with pytest.raises(CommandError, match=re.escape(message)):
        run(str(gated.pk), "--pairs", str(path))
    assert not QualificationPair.objects.exists()


def test_pairs_cannot_change_once_a_worker_started(gated, tmp_path):
    qualification_pairs_set(batch=gated, pairs=POOL)
    qualification_attempt_open(batch=gated, worker=worker_make("ann"))
    path = write(
        tmp_path, "image_id,caption_id,answer\n5,105,yes\n6,111,no\n10,110,yes\n8,104,no\n"
    )

    with pytest.raises(CommandError, match="its pairs can no longer change"):
        run(str(gated.pk), "--pairs", path)


def test_draw_on_a_built_batch_draws_once(dataset, annotators, small_config):
    from pipeline.stages import batch_create, batch_run_until

    batch = batch_create(
        dataset=dataset, name="q", raw_config={**small_config, "qualification_pairs": 4}
    )
    batch_run_until(batch_id=batch.pk, until="annotating")
    QualificationPair.objects.filter(batch=batch).delete()  # as if the build's draw failed

    # Four pairs a try, two tries: a pool of eight.
    assert run(str(batch.pk), "--draw") == f"batch {batch.pk}: drew 8 qualification pairs\n"
    again = run(str(batch.pk), "--draw", "--show")
    assert again.startswith(f"batch {batch.pk}: nothing drawn (its pool is full, or no round)")
    assert again.count(" golden ") == 8


def test_unknown_batch_and_a_batch_without_round(tiny):
    with pytest.raises(CommandError, match="no batch 999"):
        run("999")
    plain = batch_make(tiny)
    assert "has no qualification round" in run(str(plain.pk))
