"""Setting a batch up from its page (issue 28): a new instructions version and the pairs of
its qualification round, through the services `batch_instructions` and
`batch_qualification` use; the services' refusals show on the page, staff only."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from annotation.instructions import instructions_current
from annotation.models import Batch, HITItem, Instructions, QualificationPair
from frontend.views.wizard_instructions import PREFIX, examples_initial
from mitl.instructions import content_examples

pytestmark = pytest.mark.django_db


@pytest.fixture
def small_config(small_config):
    return {**small_config, "qualification_pairs": 4}


def client_of(*, staff: bool) -> Client:
    client = Client()
    client.force_login(
        get_user_model().objects.create_user("boss" if staff else "ann", is_staff=staff)
    )
    return client


def new_page(batch: Batch) -> str:
    return reverse("frontend:batch-instructions-new", args=[batch.pk])


def pairs_page(batch: Batch) -> str:
    return reverse("frontend:batch-qualification-pairs", args=[batch.pk])


def current_rows(batch: Batch) -> dict[str, object]:
    """The POST data of the form as it comes prefilled with the current version."""
    initial = examples_initial(content_examples(instructions_current(batch=batch).content))
    return {f"{PREFIX}-{key}": value for key, value in initial.items()}


# --- a new instructions version ---------------------------------------------------------


def test_the_batch_page_links_to_a_form_prefilled_with_the_current_examples(annotating_batch):
    client = client_of(staff=True)
    html = client.get(reverse("frontend:batch", args=[annotating_batch.pk])).content.decode()
    assert f'href="{new_page(annotating_batch)}"' in html
    assert "manage.py batch_instructions" not in html

    page = client.get(new_page(annotating_batch)).content.decode()
    example = content_examples(instructions_current(batch=annotating_batch).content)[0]
    assert 'data-wait="Saving…"' in page and "csrfmiddlewaretoken" in page
    assert f'name="{PREFIX}-{example.level.value}_image" value="{example.image}"' in page
    assert "saving makes version 2" in page


def test_saving_the_form_makes_the_next_version(annotating_batch):
    data = current_rows(annotating_batch) | {f"{PREFIX}-yes_note": "Look at the dog."}
    response = client_of(staff=True).post(new_page(annotating_batch), data, follow=True)

    assert response.redirect_chain[-1][0] == reverse("frontend:batch", args=[annotating_batch.pk])
    saved = instructions_current(batch=annotating_batch)
    assert saved.version == 2 and saved.created_by.username == "boss"
    yes = next(e for e in content_examples(saved.content) if e.level == "yes")
    assert yes.note == "Look at the dog."
    assert "Instructions version 2 saved" in response.content.decode()


def test_an_id_the_dataset_lacks_is_refused_with_the_services_message(annotating_batch):
    data = current_rows(annotating_batch) | {f"{PREFIX}-yes_image": 987654}
    response = client_of(staff=True).post(new_page(annotating_batch), data)

    assert response.status_code == 200
    assert "has no image with id 987654" in response.content.decode()
    assert Instructions.objects.filter(batch=annotating_batch).count() == 1


# --- the qualification round's pairs --------------------------------------------------------


def free_pairs(batch: Batch, n: int) -> list[tuple[int, int]]:
    """n (image id, caption id) pairs of the dataset that no HIT page of the batch shows."""
    on_page = set(HITItem.objects.filter(hit__batch=batch).values_list("image_id", "caption_id"))
    captions = batch.dataset.captions.select_related("image").order_by("pk")
    pairs = [(c.image.ext_id, c.ext_id) for c in captions if (c.image_id, c.pk) not in on_page]
    return pairs[:n]


def pool_rows(batch: Batch) -> list[str]:
    """CSV rows of a pool for four pairs a try and two tries: 4 YES and 4 NO, off every page."""
    on_page = set(HITItem.objects.filter(hit__batch=batch).values_list("image_id", "caption_id"))
    captions = list(batch.dataset.captions.select_related("image").order_by("pk"))
    own = [(c.image.ext_id, c.ext_id) for c in captions if (c.image_id, c.pk) not in on_page]
    other = [
        (image.ext_id, c.ext_id)
        for c, image in zip(captions, [c.image for c in captions[1:]], strict=False)
        if image.pk != c.image_id and (image.pk, c.pk) not in on_page
    ]
    return [f"{i},{c},yes,its own" for i, c in own[:4]] + [f"{i},{c},no," for i, c in other[:4]]


def csv_upload(rows: list[str]) -> SimpleUploadedFile:
    text = "image_id,caption_id,answer,note\n" + "\n".join(rows) + "\n"
    return SimpleUploadedFile("pairs.csv", text.encode(), content_type="text/csv")


def test_an_uploaded_csv_becomes_the_round(annotating_batch):
    client = client_of(staff=True)
    html = client.get(reverse("frontend:batch", args=[annotating_batch.pk])).content.decode()
    assert 'id="qualification-upload"' in html and 'data-wait="Checking the pairs…"' in html
    rows = pool_rows(annotating_batch)

    response = client.post(pairs_page(annotating_batch), {"pairs": csv_upload(rows)}, follow=True)

    assert "8 qualification pairs set from pairs.csv" in response.content.decode()
    stored = QualificationPair.objects.filter(batch=annotating_batch)
    assert [p.source for p in stored] == ["admin"] * 8
    assert {p.note for p in stored} == {"its own", ""}


def test_a_csv_too_small_for_every_try_is_refused_with_the_numbers(annotating_batch):
    before = list(QualificationPair.objects.filter(batch=annotating_batch).values_list("pk"))
    rows = pool_rows(annotating_batch)[2:6]  # one try's worth: 2 YES, 2 NO

    response = client_of(staff=True).post(
        pairs_page(annotating_batch), {"pairs": csv_upload(rows)}, follow=True
    )

    assert "the pool needs at least 4 YES and 4 NO pairs (4 pairs x 2 tries)" in (
        response.content.decode()
    )
    assert (
        list(QualificationPair.objects.filter(batch=annotating_batch).values_list("pk")) == before
    )


def test_a_bad_line_is_refused_naming_it_and_nothing_changes(annotating_batch):
    before = list(QualificationPair.objects.filter(batch=annotating_batch).values_list("pk"))
    rows = pool_rows(annotating_batch)
    rows[1] = "999999,1,yes,"

    response = client_of(staff=True).post(
        pairs_page(annotating_batch), {"pairs": csv_upload(rows)}, follow=True
    )

    assert "pairs.csv line 3: the batch&#x27;s dataset has no image 999999" in (
        response.content.decode()
    )
    assert (
        list(QualificationPair.objects.filter(batch=annotating_batch).values_list("pk")) == before
    )


def test_a_file_that_is_not_a_pairs_csv_says_what_is_wrong(annotating_batch):
    upload = SimpleUploadedFile("pairs.csv", b"image,caption\n1,2\n")
    response = client_of(staff=True).post(
        pairs_page(annotating_batch), {"pairs": upload}, follow=True
    )
    assert "pairs.csv line 1: the header must name image_id,caption_id,answer" in (
        response.content.decode()
    )


def test_the_draw_button_draws_the_pairs_the_round_lacks(annotating_batch):
    QualificationPair.objects.filter(batch=annotating_batch).delete()
    client = client_of(staff=True)
    html = client.get(reverse("frontend:batch", args=[annotating_batch.pk])).content.decode()
    assert 'id="qualification-draw"' in html

    response = client.post(pairs_page(annotating_batch), {"draw": "1"}, follow=True)

    assert "Drew 8 qualification pairs." in response.content.decode()  # 4 a try, 2 tries
    assert QualificationPair.objects.filter(batch=annotating_batch, source="golden").count() == 8


def test_a_batch_without_a_round_is_refused_with_the_services_message(annotating_batch):
    config = {**annotating_batch.config, "qualification_pairs": 0}
    Batch.objects.filter(pk=annotating_batch.pk).update(config=config)
    rows = [f"{image},{caption},yes," for image, caption in free_pairs(annotating_batch, 1)]
    response = client_of(staff=True).post(
        pairs_page(annotating_batch), {"pairs": csv_upload(rows)}, follow=True
    )
    assert "has no qualification round" in response.content.decode()


# --- staff only -----------------------------------------------------------------------------


@pytest.mark.parametrize("page", [new_page, pairs_page])
def test_only_staff_may_post(annotating_batch, page):
    path = page(annotating_batch)
    assert Client().post(path, {"draw": "1"})["Location"] == f"{reverse('login')}?next={path}"
    assert client_of(staff=False).post(path, {"draw": "1"}).status_code == 403
    assert Instructions.objects.filter(batch=annotating_batch).count() == 1
