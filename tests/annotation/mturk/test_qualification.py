"""A batch's qualification round on MTurk, through the Stubber on the real boto3 client:
the QualificationType made at publication (with its Test and AnswerKey, or without a test
in granted mode), its requirement on the HIT type, reuse on a resumed publication, one
type per environment, a type found again by its name, and grants."""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET

import pytest
from botocore.stub import ANY
from django.core.management import call_command
from django.test import Client

from annotation.errors import ServiceError
from annotation.goldens import golden_pool
from annotation.models import Batch, Caption, HITItem, Image, QualificationPair, Worker
from annotation.mturk.errors import MTurkError
from annotation.mturk.hit_settings import mturk_settings_save
from annotation.mturk.hit_type import HitTypeSettings, hit_type_request
from annotation.mturk.publish import mturk_publish, mturk_publish_recorded
from annotation.mturk.qualification import (
    mturk_qualification_ensure,
    mturk_qualification_grant,
)
from annotation.mturk.qualification_test import ANSWER_KEY_NS, QUESTION_FORM_NS
from annotation.mturk.sandbox import mturk_sandbox_reset
from annotation.qualification.attempts import (
    qualification_answer_record,
    qualification_attempt_open,
    qualification_pair_next,
)
from annotation.qualification.pairs import (
    QualificationPairInput,
    qualification_pairs_draw,
    qualification_pairs_set,
)

from .helpers import (
    BASE,
    TYPE_ID,
    create_hit_params,
    expect_create_hit,
    hits_of,
    publish,
    remote_hit_id,
    stub_past,
)

pytestmark = pytest.mark.django_db

QUAL_ID = "3QUAL00000000000000000000000001"
QUAL_ID_2 = "3QUAL00000000000000000000000002"
KEYWORDS = "image, description, caption, qualification, test"
TRICKY = 'A dog & a "cat" <3 on a <b>mat</b>'
QF = f"{{{QUESTION_FORM_NS}}}"
AK = f"{{{ANSWER_KEY_NS}}}"


def with_round(batch: Batch, *, pairs: int, share: float = 0.8, attempts: int = 2) -> Batch:
    """Give the batch a qualification round of `pairs` pairs a try and MTurk's test of as
    many pairs of its own, alternately positive and negative; the first caption holds
    characters XML must escape."""
    config = {
        **batch.config,
        "qualification_pairs": pairs,
        "qualification_pass": share,
        "qualification_attempts": attempts,
    }
    Batch.objects.filter(pk=batch.pk).update(config=config)
    batch.refresh_from_db()
    captions = list(Caption.objects.filter(dataset=batch.dataset).order_by("pk")[:pairs])
    Caption.objects.filter(pk=captions[0].pk).update(text=TRICKY)
    for position, caption in enumerate(captions):
        positive = position % 2 == 0
        image = (
            caption.image
            if positive
            else Image.objects.filter(dataset=batch.dataset)
            .exclude(pk=caption.image_id)
            .order_by("-pk")
            .first()
        )
        QualificationPair.objects.create(
            batch=batch,
            position=position,
            image=image,
            caption=caption,
            positive=positive,
            source="admin",
            mturk_test=True,
        )
    return batch


def requirement(type_id: str, minimum: int, guarded: str = "Accept") -> dict:
    return {
        "QualificationTypeId": type_id,
        "Comparator": "GreaterThanOrEqualTo",
        "IntegerValues": [minimum],
        "ActionsGuarded": guarded,
    }


def expect_hit_type_with(stub, qualification: dict, *, production=False, type_id=TYPE_ID):
    """CreateHITType with the usual requirements and then the batch's qualification."""
    request = hit_type_request(HitTypeSettings(), sandbox=not production)
    request["QualificationRequirements"] = [*request["QualificationRequirements"], qualification]
    stub.add_response("create_hit_type", {"HITTypeId": type_id}, request)


def expect_test_type(stub, *, duration: int, retry: int | None = 86400, type_id=QUAL_ID):
    params = {
        "Name": ANY,
        "Description": ANY,
        "Keywords": KEYWORDS,
        "QualificationTypeStatus": "Active",
        "Test": ANY,
        "AnswerKey": ANY,
        "TestDurationInSeconds": duration,
    }
    if retry is not None:
        params["RetryDelayInSeconds"] = retry
    stub.add_response(
        "create_qualification_type", {"QualificationType": {"QualificationTypeId": type_id}}, params
    )


def sent(client, operation: str) -> list[dict]:
    """Record the parameters of every call of `operation` (what MTurk would receive)."""
    calls: list[dict] = []
    client.meta.events.register(
        f"before-parameter-build.mturk.{operation}",
        lambda params, **kwargs: calls.append(dict(params)),
    )
    return calls


def qualification_state(batch: Batch) -> dict:
    return Batch.objects.get(pk=batch.pk).mturk["qualification"]


@pytest.mark.parametrize(
    ("pairs", "share", "minimum", "duration"),
    [
        (10, 0.8, 80, 600),  # 8 of 10 right; a minute a pair
        (4, 0.75, 75, 300),  # 3 of 4; at least five minutes
        (3, 2 / 3, 66, 300),  # 2 of 3 right is 66.67%: 66 passes it however MTurk rounds
    ],
)
def test_publication_makes_the_test_then_a_hit_type_that_requires_its_pass_mark(
    annotating_batch, client, stub, pairs, share, minimum, duration
):
    batch = with_round(annotating_batch, pairs=pairs, share=share)
    created = sent(client, "CreateQualificationType")
    expect_test_type(stub, duration=duration)
    expect_hit_type_with(stub, requirement(QUAL_ID, minimum))
    for hit in hits_of(batch):
        expect_create_hit(stub, batch, hit)
    result = mturk_publish(batch=batch, client=client)
    stub.assert_no_pending_responses()

    assert result.qualification_type_id == QUAL_ID
    stored = qualification_state(batch)["sandbox"]
    assert (stored["id"], stored["mode"], stored["minimum"], stored["pairs"]) == (
        QUAL_ID,
        "test",
        minimum,
        pairs,
    )
    (request,) = created
    assert request["Name"].startswith(f"Image descriptions: qualification for batch {batch.pk} (")
    assert f"{pairs} pairs" in request["Description"]

    form = ET.fromstring(request["Test"])
    questions = form.findall(f"{QF}Question")
    assert len(questions) == pairs
    first = questions[0]
    assert first.findtext(f"{QF}QuestionContent/{QF}Text") == f"Description: {TRICKY}"
    key = ET.fromstring(request["AnswerKey"])
    scored = [
        sorted(o.findtext(f"{AK}SelectionIdentifier") for o in q.findall(f"{AK}AnswerOption"))
        for q in key.findall(f"{AK}Question")
    ]
    stored_pairs = QualificationPair.objects.filter(batch=batch, mturk_test=True).order_by(
        "position"
    )
    assert scored == [
        ["weak_yes", "yes"] if pair.positive else ["no", "weak_no"] for pair in stored_pairs
    ]
    maximum = f"{AK}QualificationValueMapping/{AK}PercentageMapping/{AK}MaximumSummedScore"
    assert key.findtext(maximum) == str(pairs)

    # The test's images are this platform's signed public links, served without a login.
    url = first.findtext(f"{QF}QuestionContent/{QF}Binary/{QF}DataURL")
    assert url.startswith(f"{BASE}/mturk/qualification-images/{stored_pairs[0].pk}/")
    response = Client().get(url.removeprefix(BASE))
    assert response.status_code == 200
    assert b"".join(response.streaming_content).startswith(b"\x89PNG")
    assert response["Content-Disposition"] == (
        f'inline; filename="qualification-{stored_pairs[0].pk}.png"'
    )


def test_one_attempt_means_no_retries(annotating_batch, client, stub):
    batch = with_round(annotating_batch, pairs=4, attempts=1)
    expect_test_type(stub, duration=300, retry=None)  # RetryDelayInSeconds left out
    assert mturk_qualification_ensure(batch=batch, client=client, production=False) == QUAL_ID
    stub.assert_no_pending_responses()


def test_the_retry_delay_is_a_setting(annotating_batch, client, stub):
    batch = with_round(annotating_batch, pairs=4, attempts=3)
    mturk_settings_save(batch=batch, raw={"qualification_retry_minutes": "90"})
    expect_test_type(stub, duration=300, retry=90 * 60)
    assert mturk_qualification_ensure(batch=batch, client=client, production=False) == QUAL_ID
    stub.assert_no_pending_responses()


def test_a_resumed_publication_reuses_the_type(annotating_batch, client, stub):
    batch = with_round(annotating_batch, pairs=5)
    expect_test_type(stub, duration=300)
    stub.add_client_error("create_hit_type", "RequestError", "Reward too low")
    with pytest.raises(MTurkError, match="CreateHITType failed"):
        mturk_publish(batch=batch, client=client)
    assert qualification_state(batch)["sandbox"]["id"] == QUAL_ID

    # Resumed: no second CreateQualificationType (the Stubber would refuse it).
    expect_hit_type_with(stub, requirement(QUAL_ID, 80))
    for hit in hits_of(batch):
        expect_create_hit(stub, batch, hit)
    assert mturk_publish(batch=batch, client=client).qualification_type_id == QUAL_ID
    stub.assert_no_pending_responses()

    # Published: running it again sends nothing at all.
    result = mturk_publish(batch=batch, client=client)
    assert (result.created, result.already, result.qualification_type_id) == (
        0,
        len(hits_of(batch)),
        QUAL_ID,
    )


def test_another_qualification_before_any_hit_gives_another_hit_type(
    annotating_batch, client, stub
):
    batch = with_round(annotating_batch, pairs=5)
    hits = hits_of(batch)
    expect_test_type(stub, duration=300)
    expect_hit_type_with(stub, requirement(QUAL_ID, 80), type_id="3TYPEOLD")
    stub.add_client_error("create_hit_with_hit_type", "RequestError", "Insufficient funds")
    with pytest.raises(MTurkError, match="0 of"):
        mturk_publish(batch=batch, client=client)
    assert Batch.objects.get(pk=batch.pk).mturk["hit_type_id"] == "3TYPEOLD"

    # No HIT on MTurk yet: the admin switches to granting the qualification.
    mturk_settings_save(batch=batch, raw={"qualification_mode": "granted"})
    names = sent(client, "CreateQualificationType")
    stub.add_response(
        "create_qualification_type",
        {"QualificationType": {"QualificationTypeId": QUAL_ID_2}},
        {
            "Name": ANY,
            "Description": ANY,
            "Keywords": KEYWORDS,
            "QualificationTypeStatus": "Active",
        },  # no Test, AnswerKey, duration nor retry delay
    )
    expect_hit_type_with(stub, requirement(QUAL_ID_2, 80, "DiscoverPreviewAndAccept"))
    stub.add_response("list_hits", {"NumResults": 0, "HITs": []}, {"MaxResults": 100})
    for hit in hits:
        expect_create_hit(stub, batch, hit)
    mturk_publish(batch=batch, client=client)
    stub.assert_no_pending_responses()
    state = Batch.objects.get(pk=batch.pk).mturk
    assert state["hit_type_id"] == TYPE_ID  # the new HIT type, not 3TYPEOLD
    assert state["qualification"]["sandbox"]["id"] == QUAL_ID_2
    assert "there is no test to take" in names[0]["Description"]


def test_a_type_made_before_a_crash_is_found_again_by_its_name(annotating_batch, client, stub):
    batch = with_round(annotating_batch, pairs=5)
    first = sent(client, "CreateQualificationType")
    expect_test_type(stub, duration=300)
    mturk_qualification_ensure(batch=batch, client=client, production=False)
    name = first[0]["Name"]
    Batch.objects.filter(pk=batch.pk).update(mturk={})  # MTurk made it; we never stored it

    stub.add_client_error(
        "create_qualification_type",
        "RequestError",
        "You have already created a QualificationType with this name.",
        expected_params={
            "Name": name,  # the same name again: same platform, batch and content
            "Description": ANY,
            "Keywords": KEYWORDS,
            "QualificationTypeStatus": "Active",
            "Test": ANY,
            "AnswerKey": ANY,
            "TestDurationInSeconds": 300,
            "RetryDelayInSeconds": 86400,
        },
    )
    stub.add_response(
        "list_qualification_types",
        {
            "NumResults": 2,
            "QualificationTypes": [
                {"QualificationTypeId": "3OTHER", "Name": f"{name} (copy)"},
                {"QualificationTypeId": QUAL_ID, "Name": name},
            ],
        },
        {"MaxResults": 100, "Query": name, "MustBeRequestable": False, "MustBeOwnedByCaller": True},
    )
    assert mturk_qualification_ensure(batch=batch, client=client, production=False) == QUAL_ID
    stub.assert_no_pending_responses()
    assert qualification_state(batch)["sandbox"]["name"] == name


def test_another_refusal_of_the_type_is_not_hidden(annotating_batch, client, stub):
    batch = with_round(annotating_batch, pairs=5)
    stub.add_client_error("create_qualification_type", "RequestError", "Test is not valid XML")
    stub.add_response("list_qualification_types", {"NumResults": 0, "QualificationTypes": []}, None)
    with pytest.raises(MTurkError, match="Test is not valid XML"):
        mturk_publish(batch=batch, client=client)
    stub.assert_no_pending_responses()
    assert "qualification" not in Batch.objects.get(pk=batch.pk).mturk


def test_a_sandbox_type_is_never_required_on_production(annotating_batch, client, stub):
    batch = with_round(annotating_batch, pairs=5)
    expect_test_type(stub, duration=300)
    expect_hit_type_with(stub, requirement(QUAL_ID, 80))
    hits = hits_of(batch)
    for hit in hits:
        expect_create_hit(stub, batch, hit)
    mturk_publish(batch=batch, client=client)
    for hit in hits_of(batch):
        stub.add_response(
            "update_expiration_for_hit", {}, {"HITId": hit.external_id, "ExpireAt": stub_past()}
        )
    mturk_sandbox_reset(batch=batch, client=client)
    assert qualification_state(batch)["sandbox"]["id"] == QUAL_ID  # kept for the sandbox

    expect_test_type(stub, duration=300, type_id=QUAL_ID_2)
    expect_hit_type_with(stub, requirement(QUAL_ID_2, 80), production=True)
    for hit in hits:
        stub.add_response(
            "create_hit_with_hit_type",
            {"HIT": {"HITId": remote_hit_id(hit), "HITTypeId": TYPE_ID}},
            create_hit_params(batch, hit, production=True),
        )
    result = mturk_publish(batch=batch, client=client, production=True)
    stub.assert_no_pending_responses()
    assert result.qualification_type_id == QUAL_ID_2
    both = qualification_state(batch)
    assert (both["sandbox"]["id"], both["production"]["id"]) == (QUAL_ID, QUAL_ID_2)
    assert both["sandbox"]["name"] != both["production"]["name"]


def test_a_batch_without_a_round_publishes_as_before(annotating_batch, client, stub):
    ensured = mturk_qualification_ensure(batch=annotating_batch, client=client, production=False)
    assert ensured is None
    publish(annotating_batch, client, stub)  # exactly the requests of every other test
    assert "qualification" not in Batch.objects.get(pk=annotating_batch.pk).mturk


def test_the_pairs_are_drawn_at_publication_when_the_batch_has_none(annotating_batch, client, stub):
    config = {**annotating_batch.config, "qualification_pairs": 4}
    Batch.objects.filter(pk=annotating_batch.pk).update(config=config)
    annotating_batch.refresh_from_db()
    assert not QualificationPair.objects.filter(batch=annotating_batch).exists()
    created = sent(client, "CreateQualificationType")
    expect_test_type(stub, duration=300)
    mturk_qualification_ensure(batch=annotating_batch, client=client, production=False)
    stub.assert_no_pending_responses()
    drawn = QualificationPair.objects.filter(batch=annotating_batch)
    assert drawn.count() == 4 and all(drawn.values_list("mturk_test", flat=True))
    assert sum(drawn.values_list("positive", flat=True)) == 2
    assert len(ET.fromstring(created[0]["Test"]).findall(f"{QF}Question")) == 4


def test_the_test_shows_pairs_that_no_try_on_the_platform_shows(annotating_batch, client, stub):
    # MTurk shows the same test on every retry; a pair that a try here also showed would
    # have its answer told by the try's feedback (to a worker on both sides).
    config = {**annotating_batch.config, "qualification_pairs": 4, "qualification_attempts": 2}
    Batch.objects.filter(pk=annotating_batch.pk).update(config=config)
    annotating_batch.refresh_from_db()
    assert qualification_pairs_draw(batch=annotating_batch) == 8  # the platform's pool
    created = sent(client, "CreateQualificationType")
    expect_test_type(stub, duration=300)
    mturk_qualification_ensure(batch=annotating_batch, client=client, production=False)
    stub.assert_no_pending_responses()

    test_pairs = QualificationPair.objects.filter(batch=annotating_batch, mturk_test=True)
    urls = [
        q.findtext(f"{QF}QuestionContent/{QF}Binary/{QF}DataURL")
        for q in ET.fromstring(created[0]["Test"]).findall(f"{QF}Question")
    ]
    assert sorted(int(url.split("/")[-3]) for url in urls) == sorted(
        test_pairs.values_list("pk", flat=True)
    )
    worker = Worker.objects.create(source="platform", external_id="both-sides")
    shown = set()
    for _ in range(2):
        attempt = qualification_attempt_open(batch=annotating_batch, worker=worker)
        shown |= set(attempt.pair_ids)
        while (pair := qualification_pair_next(attempt=attempt)) is not None:
            qualification_answer_record(attempt=attempt, pair_id=pair.pk, level="no")
    assert len(shown) == 8 and not shown & set(test_pairs.values_list("pk", flat=True))
    # Goldens drawn later never show them either.
    golden = golden_pool(batch_id=annotating_batch.pk, dataset_id=annotating_batch.dataset_id)
    assert not {(p.image_id, p.caption_id) for p in test_pairs} & set(golden.golden_tp_pairs)


def off_page_pool(batch: Batch, count: int) -> list[QualificationPairInput]:
    """A pool an admin may choose: `count` valid captions with their own images (YES), then
    as many with another caption's image (NO), on no HIT page and not in MTurk's test."""
    taken = set(HITItem.objects.filter(hit__batch=batch).values_list("image_id", "caption_id"))
    taken |= set(
        QualificationPair.objects.filter(batch=batch).values_list("image_id", "caption_id")
    )
    captions = list(
        Caption.objects.filter(dataset=batch.dataset, is_invalid=False)
        .select_related("image")
        .order_by("-pk")
    )
    own = [c for c in captions if (c.image_id, c.pk) not in taken][:count]
    other = [
        (captions[(index + 1) % len(captions)].image, caption)
        for index, caption in enumerate(captions)
        if (captions[(index + 1) % len(captions)].image_id, caption.pk) not in taken
        and captions[(index + 1) % len(captions)].image_id != caption.image_id
    ][:count]
    return [QualificationPairInput(c.image.ext_id, c.ext_id, True) for c in own] + [
        QualificationPairInput(image.ext_id, c.ext_id, False) for image, c in other
    ]


def test_the_tests_pairs_stay_while_the_pool_may_change(annotating_batch, client, stub):
    batch = with_round(annotating_batch, pairs=4)
    expect_test_type(stub, duration=300)
    expect_hit_type_with(stub, requirement(QUAL_ID, 100))  # 0.8 of 4 pairs: all 4
    for hit in hits_of(batch):
        expect_create_hit(stub, batch, hit)
    mturk_publish(batch=batch, client=client)
    test_pairs = set(QualificationPair.objects.filter(batch=batch).values_list("pk", flat=True))

    # The pool of the platform's tries is apart from MTurk's test: it may still change.
    assert qualification_pairs_set(batch=batch, pairs=off_page_pool(batch, 4)) == 8
    kept = QualificationPair.objects.filter(batch=batch, mturk_test=True)
    assert set(kept.values_list("pk", flat=True)) == test_pairs


def test_a_test_made_of_the_pool_keeps_the_pool_while_published_hits_require_it(
    annotating_batch, client, stub
):
    batch = with_round(annotating_batch, pairs=4)
    expect_test_type(stub, duration=300)
    expect_hit_type_with(stub, requirement(QUAL_ID, 100))  # 0.8 of 4 pairs: all 4
    for hit in hits_of(batch):
        expect_create_hit(stub, batch, hit)
    mturk_publish(batch=batch, client=client)
    # A test published before MTurk's test had pairs of its own showed the pool.
    QualificationPair.objects.filter(batch=batch).update(mturk_test=False)
    before = list(QualificationPair.objects.filter(batch=batch).values_list("pk", flat=True))

    # MTurk's test links to these pairs' images: replacing them would break it.
    with pytest.raises(ServiceError, match="require the qualification test made of these pairs"):
        qualification_pairs_set(batch=batch, pairs=off_page_pool(batch, 4))

    assert list(QualificationPair.objects.filter(batch=batch).values_list("pk", flat=True)) == (
        before
    )


# --- granted mode -------------------------------------------------------------------------


def publish_granted(batch: Batch, client, stub) -> None:
    mturk_settings_save(batch=batch, raw={"qualification_mode": "granted"})
    stub.add_response(
        "create_qualification_type",
        {"QualificationType": {"QualificationTypeId": QUAL_ID}},
        {
            "Name": ANY,
            "Description": ANY,
            "Keywords": KEYWORDS,
            "QualificationTypeStatus": "Active",
        },
    )
    expect_hit_type_with(stub, requirement(QUAL_ID, 80, "DiscoverPreviewAndAccept"))
    for hit in hits_of(batch):
        expect_create_hit(stub, batch, hit)
    lines = mturk_publish_recorded(batch=batch, production=False, client=client)
    stub.assert_no_pending_responses()
    assert f"qualification type {QUAL_ID}" in lines


def test_granted_mode_makes_a_type_without_a_test_and_grants_it_once(
    annotating_batch, client, stub
):
    batch = with_round(annotating_batch, pairs=5)
    publish_granted(batch, client, stub)
    worker = Worker.objects.create(source="mturk", external_id="A1WORKER")
    stub.add_response(
        "associate_qualification_with_worker",
        {},
        {
            "QualificationTypeId": QUAL_ID,
            "WorkerId": "A1WORKER",
            "IntegerValue": 100,
            "SendNotification": True,
        },
    )
    assert mturk_qualification_grant(batch=batch, worker=worker, client=client) is True
    stub.assert_no_pending_responses()
    assert list(qualification_state(batch)["sandbox"]["grants"]) == ["A1WORKER"]
    # Again: nothing sent (the Stubber has no response queued and would refuse a call).
    assert mturk_qualification_grant(batch=batch, worker=worker, client=client) is False


def test_grants_are_refused_with_a_reason(annotating_batch, client, stub):
    batch = with_round(annotating_batch, pairs=5)
    worker = Worker(source="mturk", external_id="A1WORKER")
    with pytest.raises(MTurkError, match=r"is not published on MTurk: .* publish it first"):
        mturk_qualification_grant(batch=batch, worker=worker, client=client)
    publish_granted(batch, client, stub)
    platform = Worker.objects.create(source="platform", external_id="ann")
    with pytest.raises(MTurkError, match="is not an MTurk worker"):
        mturk_qualification_grant(batch=batch, worker=platform, client=client)
    made_up = Worker(source="mturk", external_id="a1-worker")
    with pytest.raises(MTurkError, match="is not an MTurk WorkerId"):
        mturk_qualification_grant(batch=batch, worker=made_up, client=client)


def test_a_test_mode_qualification_is_earned_not_granted(annotating_batch, client, stub):
    batch = with_round(annotating_batch, pairs=5)
    expect_test_type(stub, duration=300)
    expect_hit_type_with(stub, requirement(QUAL_ID, 80))
    for hit in hits_of(batch):
        expect_create_hit(stub, batch, hit)
    mturk_publish(batch=batch, client=client)
    worker = Worker(source="mturk", external_id="A1WORKER")
    with pytest.raises(MTurkError, match="is MTurk's test \\(mode test\\)"):
        mturk_qualification_grant(batch=batch, worker=worker, client=client)


def test_the_publish_command_prints_the_qualification_type(
    annotating_batch, client, stub, monkeypatch
):
    batch = with_round(annotating_batch, pairs=5)
    monkeypatch.setattr("annotation.mturk.client.mturk_client", lambda **kwargs: client)
    expect_test_type(stub, duration=300)
    expect_hit_type_with(stub, requirement(QUAL_ID, 80))
    for hit in hits_of(batch):
        expect_create_hit(stub, batch, hit)
    out = io.StringIO()
    call_command("mturk_publish", str(batch.pk), stdout=out, stderr=io.StringIO())
    stub.assert_no_pending_responses()
    assert f"\nqualification type {QUAL_ID}\n" in out.getvalue()
