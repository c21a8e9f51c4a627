"""Datasets with counts, and their images, captions and positive sets (filters, pages)."""

from __future__ import annotations

import pytest

from annotation.models import Caption, PositivePair

pytestmark = pytest.mark.django_db


def mark_invalid(dataset, n: int) -> list[int]:
    ids = list(
        Caption.objects.filter(dataset=dataset).order_by("pk")[:n].values_list("pk", flat=True)
    )
    Caption.objects.filter(pk__in=ids).update(is_invalid=True, invalid_reason="meaningless")
    return ids


def test_a_dataset_lists_with_its_counts(ann, dataset, batch):
    mark_invalid(dataset, 3)
    body = ann.get("/api/datasets/").json()

    assert body["count"] == 1
    row = body["results"][0]
    assert row["name"] == "small"
    assert row["images"] == dataset.images.count() == 40
    assert row["captions"] == dataset.captions.count()
    assert (row["invalid_captions"], row["positive_sets"], row["batches"], row["releases"]) == (
        3,
        1,
        1,
        0,
    )


def test_the_detail_is_found_by_name_and_lists_the_positive_sets(ann, dataset):
    body = ann.get("/api/datasets/small/").json()
    assert body["positive_set_list"] == [
        {
            "id": dataset.positive_sets.get().pk,
            "name": "original",
            "source": "original",
            "pairs": dataset.captions.count(),  # each caption with its own image
        }
    ]
    assert ann.get("/api/datasets/other/").status_code == 404


def test_captions_filter_by_dataset_validity_image_and_text(staff, dataset):
    invalid = mark_invalid(dataset, 2)
    first = Caption.objects.filter(dataset=dataset).select_related("image").order_by("pk")[5]

    def ids(query: str) -> list[int]:
        response = staff.get(f"/api/captions/?page_size=500&{query}")
        assert response.status_code == 200
        return [row["id"] for row in response.json()["results"]]

    assert sorted(ids("dataset=small&is_invalid=true")) == invalid
    assert len(ids("is_invalid=false")) == dataset.captions.count() - 2
    assert ids("dataset=nope") == []
    by_image = ids(f"image={first.image.ext_id}")
    assert first.pk in by_image
    assert all(Caption.objects.get(pk=pk).image_id == first.image_id for pk in by_image)
    assert first.pk in ids(f"text={first.text[2:12].upper()}")


def test_a_caption_reads_with_its_own_image_and_why_it_is_invalid(staff, dataset):
    [pk] = mark_invalid(dataset, 1)
    body = staff.get(f"/api/captions/{pk}/").json()
    caption = Caption.objects.select_related("image").get(pk=pk)
    assert body["image"] == caption.image.ext_id
    assert (body["is_invalid"], body["invalid_reason"]) == (True, "meaningless")
    assert body["dataset"] == "small"


def test_images_filter_by_ext_id_and_come_in_pages(staff, dataset):
    image = dataset.images.order_by("ext_id")[3]
    found = staff.get(f"/api/images/?dataset=small&ext_id={image.ext_id}").json()
    page = staff.get("/api/images/?page_size=15&page=3").json()

    assert [row["id"] for row in found["results"]] == [image.pk]
    assert found["results"][0]["file_url"].endswith(".png")
    assert page["count"] == 40 and len(page["results"]) == 10


def test_a_positive_set_lists_its_pairs_by_dataset_ids(staff, dataset):
    positive_set = dataset.positive_sets.get()
    body = staff.get(f"/api/positive-sets/{positive_set.pk}/").json()
    pairs = staff.get(f"/api/positive-sets/{positive_set.pk}/pairs/?page_size=500").json()

    assert (body["name"], body["source"], body["query_counts"]) == ("original", "original", None)
    assert body["pairs"] == pairs["count"] == PositivePair.objects.count()
    expected = sorted(PositivePair.objects.values_list("image__ext_id", "caption__ext_id"))
    assert [(p["image"], p["caption"]) for p in pairs["results"]] == expected


def test_positive_sets_filter_by_source(staff, dataset):
    assert staff.get("/api/positive-sets/?source=original").json()["count"] == 1
    assert staff.get("/api/positive-sets/?source=imported").json()["count"] == 0
    assert staff.get("/api/positive-sets/?name=original&dataset=small").json()["count"] == 1
