"""The practice page of a qualification round through Django's test client: the work page
points to the round, each answer shows its feedback, the result opens (or closes) the
batch's HITs, the images stay with the worker taking the round, and the batch page sums up.
"""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from annotation.models import (
    Assignment,
    QualificationAnswer,
    QualificationAttempt,
    QualificationPair,
)

pytestmark = pytest.mark.django_db

PASSWORD = "correct horse battery"
PAIRS = 4  # 2 matches + 2 mismatches; 3 right of 4 passes at 0.75


@pytest.fixture
def small_config(small_config):
    return {
        **small_config,
        "qualification_pairs": PAIRS,
        "qualification_pass": 0.75,
        "qualification_attempts": 2,
    }


@pytest.fixture
def ann(client, db):
    client.force_login(get_user_model().objects.create_user("ann", password=PASSWORD))
    return client


def page_of(batch) -> str:
    return reverse("frontend:qualification", args=[batch.pk])


def shown_pair(html: str) -> QualificationPair:
    pair_id = int(re.search(r'id="qualification-pair" data-pair="(\d+)"', html).group(1))
    return QualificationPair.objects.get(pk=pair_id)


def answer(client, batch, right: bool):
    """Answer the pair the page shows, rightly or wrongly; return the feedback response."""
    pair = shown_pair(client.get(page_of(batch)).content.decode())
    level = "yes" if pair.positive == right else "no"
    posted = client.post(page_of(batch), {"pair": pair.pk, "level": level, "elapsed_ms": "2100"})
    assert posted.status_code == 302
    assert posted.url == f"{page_of(batch)}?answered={pair.pk}"
    return client.get(posted.url)


def take_round(client, batch, wrong: int) -> str:
    """Start a try and answer every pair, the first `wrong` wrongly; return the result page."""
    assert client.post(page_of(batch), {"action": "start"}).status_code == 302
    for index in range(PAIRS):
        answer(client, batch, right=index >= wrong)
    return client.get(page_of(batch)).content.decode()


def test_the_work_page_sends_a_new_worker_to_the_round_instead_of_a_hit(ann, annotating_batch):
    html = ann.get(reverse("frontend:work")).content.decode()
    assert "Take the qualification round" in html
    assert page_of(annotating_batch) in html
    assert f"{PAIRS} practice pairs, pass mark 75%, 2 of 2 tries left" in html

    response = ann.post(reverse("frontend:work-next"), follow=True)

    assert not Assignment.objects.exists()
    text = response.content.decode()
    assert "need their qualification round first (small batch)" in text
    assert "There is no HIT to do" not in text


def test_each_answer_shows_whether_it_was_right_the_right_answer_and_why(ann, annotating_batch):
    intro = ann.get(page_of(annotating_batch)).content.decode()
    assert "You pass with at least <strong>75%</strong> right answers" in intro
    ann.post(page_of(annotating_batch), {"action": "start"})
    first = ann.get(page_of(annotating_batch)).content.decode()
    pair = shown_pair(first)
    assert ">1 / 4<" in first
    image_url = reverse("frontend:qualification-image", args=[annotating_batch.pk, pair.pk])
    assert image_url in first
    assert pair.caption.text in first
    assert "positive" not in first and pair.note not in first  # nothing gives the answer away

    feedback = answer(ann, annotating_batch, right=False).content.decode()

    assert "<strong>Wrong.</strong>" in feedback
    expected = "100% YES or Partially YES" if pair.positive else "Mostly NO or 100% NO"
    assert f'<strong id="expected">{expected}' in feedback
    assert pair.note.replace("'", "&#x27;") in feedback
    assert "Next pair" in feedback
    image = ann.get(image_url)
    assert image.status_code == 200
    assert image["Content-Disposition"].endswith(f'filename="practice-{pair.pk}.png"')
    # A reload posts nothing; posting the same pair again stores no second answer.
    ann.post(page_of(annotating_batch), {"pair": pair.pk, "level": "yes"})
    stored = QualificationAnswer.objects.get(pair=pair)
    assert (stored.correct, stored.elapsed_ms) == (False, 2100)

    following = answer(ann, annotating_batch, right=True).content.decode()
    assert "<strong>Right.</strong>" in following and "2 / 4 answered" in following


def test_passing_opens_the_batchs_hits(ann, annotating_batch):
    result = take_round(ann, annotating_batch, wrong=1)

    assert "Try 1: <strong>3</strong> of 4 right" in result
    assert "You passed." in result and 'id="start-next"' in result
    response = ann.post(reverse("frontend:work-next"))
    assignment = Assignment.objects.get()
    assert response.url == reverse("frontend:hit", args=[assignment.pk])
    assert assignment.hit.batch == annotating_batch
    work = ann.get(reverse("frontend:work")).content.decode()
    assert "qualified. Its HITs are open to you" in work


def test_failing_twice_closes_the_batch(ann, annotating_batch):
    first = take_round(ann, annotating_batch, wrong=2)
    assert "You did not pass this time." in first and 'id="try-again"' in first
    assert "1 try left" in first

    second = take_round(ann, annotating_batch, wrong=4)

    # The second try showed none of the pairs whose answers the first try's feedback told.
    by_try = {
        number: set(
            QualificationAnswer.objects.filter(attempt__number=number).values_list(
                "pair", flat=True
            )
        )
        for number in (1, 2)
    }
    assert len(by_try[1]) == len(by_try[2]) == PAIRS and not by_try[1] & by_try[2]
    assert "no tries left: this batch is closed to you" in second
    work = ann.get(reverse("frontend:work")).content.decode()
    assert (
        "You did not pass the qualification for batch <strong>small batch</strong>; no tries left"
        in work
    )
    again = ann.post(page_of(annotating_batch), {"action": "start"}, follow=True)
    assert "no tries left (of 2)" in again.content.decode()
    ann.post(reverse("frontend:work-next"))
    assert not Assignment.objects.exists()


def test_the_images_stay_with_the_worker_taking_the_round(ann, client, annotating_batch):
    ann.post(page_of(annotating_batch), {"action": "start"})
    attempt = QualificationAttempt.objects.get()
    pair = QualificationPair.objects.get(pk=attempt.pair_ids[-1])  # not answered yet
    url = reverse("frontend:qualification-image", args=[annotating_batch.pk, pair.pk])
    assert ann.get(url).status_code == 200
    # The rest of the pool is for later tries: its images stay closed.
    later = QualificationPair.objects.filter(batch=annotating_batch).exclude(
        pk__in=attempt.pair_ids
    )[0]
    closed = reverse("frontend:qualification-image", args=[annotating_batch.pk, later.pk])
    assert ann.get(closed).status_code == 404

    client.logout()
    client.force_login(get_user_model().objects.create_user("bea"))
    assert client.get(url).status_code == 404  # never started: refused before any lookup
    other = reverse("frontend:qualification-image", args=[annotating_batch.pk + 1, pair.pk])
    assert client.get(other).status_code == 404


def test_a_batch_without_a_round_sends_the_worker_back(ann, dataset, annotators, small_config):
    from pipeline.stages import batch_create

    plain = batch_create(
        dataset=dataset, name="plain", raw_config={**small_config, "qualification_pairs": 0}
    )
    response = ann.get(page_of(plain), follow=True)
    assert response.redirect_chain[-1][0] == reverse("frontend:work")
    assert "Batch plain needs no qualification round." in response.content.decode()


def test_the_batch_page_shows_the_rounds_settings_pairs_and_results(ann, client, annotating_batch):
    take_round(ann, annotating_batch, wrong=0)
    staff = get_user_model().objects.create_user("boss", is_staff=True)
    client.logout()
    client.force_login(staff)

    html = client.get(reverse("frontend:batch", args=[annotating_batch.pk])).content.decode()

    assert "<h2>Qualification round</h2>" in html
    assert "practice round of <strong>4</strong> pairs at <strong>75%</strong> right" in html
    assert "in at most <strong>2</strong> tries" in html
    assert "so the pool needs at least <strong>8</strong> pairs" in html
    assert "The pool has <strong>8</strong> pairs (8 drawn as golden pairs)" in html
    assert "1 try (0 in progress, 1 finished); <strong>1</strong> worker passed" in html
    assert "pass rate <strong>1.00</strong> of finished tries" in html
    assert html.count('<td class="num">1/1</td>') == PAIRS


@pytest.mark.parametrize("bad", ["²", "-3", "9" * 30, "9" * 5000])
def test_numbers_the_page_cannot_read_are_ignored_not_a_server_error(ann, annotating_batch, bad):
    # "²" passes str.isdigit() but not int(); 30 digits overflow the database; 5000 digits
    # overflow int() itself: each was a 500.
    ann.post(page_of(annotating_batch), {"action": "start"})
    assert ann.get(f"{page_of(annotating_batch)}?answered={bad}").status_code == 200

    refused = ann.post(page_of(annotating_batch), {"pair": bad, "level": "yes"}, follow=True)
    assert refused.status_code == 200
    assert "Start the qualification round first." in refused.content.decode()

    pair = shown_pair(ann.get(page_of(annotating_batch)).content.decode())
    posted = ann.post(
        page_of(annotating_batch), {"pair": pair.pk, "level": "yes", "elapsed_ms": bad}
    )
    assert posted.url == f"{page_of(annotating_batch)}?answered={pair.pk}"
    assert QualificationAnswer.objects.get(pair=pair).elapsed_ms == 0
