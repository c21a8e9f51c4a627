"""A batch's instructions: proposed examples, versions, the dataset check, the version each
assignment carries, the first-time rule, and the `batch_instructions` command."""

from __future__ import annotations

import io
import json

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.urls import reverse

from annotation.errors import ServiceError
from annotation.goldens import golden_pool
from annotation.handout import assignment_create, hit_assign_next
from annotation.instructions import (
    instructions_current,
    instructions_examples_propose,
    instructions_first_time,
    instructions_overview,
    instructions_save,
    instructions_shown,
)
from annotation.models import Caption, Image, Instructions
from annotation.mturk.hit_page import mturk_assignment_open
from annotation.synthetic import synthetic_regenerate
from mitl.instructions import Example, content_examples
from mitl.judgements import Level
from mitl.synthetic.truth import judge

from .crowd_factories import T0, batch_make, hit_make, worker_make

pytestmark = pytest.mark.django_db

YES = Example(level=Level.YES, image=1, caption=101, note="its own caption")
NO = Example(level=Level.NO, image=1, caption=105, note="another image's caption")


def no_link(instructions_id: int, index: int) -> str:
    return f"/example/{instructions_id}/{index}"


# --- proposing ------------------------------------------------------------------------------


def test_a_synthetic_dataset_proposes_one_example_per_answer_matching_its_truth(dataset):
    examples = instructions_examples_propose(dataset=dataset, seed=1)
    assert [e.level for e in examples] == [Level.YES, Level.WEAK_YES, Level.WEAK_NO, Level.NO]
    truth = synthetic_regenerate(dataset=dataset)
    for example in examples:
        expected = judge(truth.scene(example.image), truth.caption(example.caption))
        assert (expected.level, expected.shortcomings, expected.wrong_concepts) == (
            example.level,
            example.shortcomings,
            example.wrong_concepts,
        )
        assert example.note
    middle = [e for e in examples if e.level in (Level.WEAK_YES, Level.WEAK_NO)]
    assert all(e.shortcomings for e in middle)


def test_a_synthetic_proposal_leaves_out_invalid_captions(dataset):
    first = instructions_examples_propose(dataset=dataset, seed=1)
    Caption.objects.filter(dataset=dataset, ext_id__in=[e.caption for e in first]).update(
        is_invalid=True, invalid_reason="meaningless"
    )
    again = instructions_examples_propose(dataset=dataset, seed=1)
    assert again and not {e.caption for e in again} & {e.caption for e in first}


def test_another_dataset_proposes_its_own_caption_as_yes_and_another_images_as_no(tiny):
    yes, no = instructions_examples_propose(dataset=tiny, seed=0)
    own = Caption.objects.get(dataset=tiny, ext_id=yes.caption)
    other = Caption.objects.get(dataset=tiny, ext_id=no.caption)
    assert (yes.level, no.level) == (Level.YES, Level.NO)
    assert own.image.ext_id == yes.image == no.image
    assert other.image.ext_id != yes.image
    assert (yes.caption_text, no.caption_text) == (own.text, other.text)


def test_no_means_an_image_without_the_yes_images_objects_where_labels_say_so(tiny):
    yes, _ = instructions_examples_propose(dataset=tiny, seed=0)
    cake = (yes.image + 5) % 12  # the only image without a dog
    Image.objects.filter(dataset=tiny).update(labels=["dog"])
    Image.objects.filter(dataset=tiny, ext_id=cake).update(labels=["cake"])
    again, no = instructions_examples_propose(dataset=tiny, seed=0)
    assert again == yes
    assert Caption.objects.get(dataset=tiny, ext_id=no.caption).image.ext_id == cake


def test_a_dataset_without_captions_proposes_nothing(db):
    from annotation.models import Dataset

    assert instructions_examples_propose(dataset=Dataset.objects.create(name="empty")) == []


# --- saving versions ------------------------------------------------------------------------


def test_a_new_batch_starts_at_version_1_with_the_proposal(batch):
    (first,) = Instructions.objects.filter(batch=batch)
    assert first.version == 1 and first.created_by is None
    proposed = instructions_examples_propose(dataset=batch.dataset, seed=1)  # the config's seed
    assert content_examples(first.content) == proposed


def test_each_save_is_the_next_version_and_keeps_the_earlier_ones(tiny):
    batch = batch_make(tiny)
    admin = get_user_model().objects.create_user("boss", is_staff=True)
    first = instructions_save(batch=batch, examples=[YES])
    second = instructions_save(batch=batch, examples=[NO, YES], user=admin)
    assert (first.version, second.version) == (1, 2)
    assert second.created_by == admin
    assert instructions_current(batch=batch) == second
    first.refresh_from_db()
    assert [e["level"] for e in first.content["examples"]] == ["yes"]
    assert [e["level"] for e in second.content["examples"]] == ["yes", "no"]


def test_golden_pairs_are_never_an_example_whose_answer_workers_read(batch):
    # The YES example is an original pair, so it would be a golden true positive; a worker
    # who read it in the instructions would know that golden's answer.
    examples = content_examples(Instructions.objects.get(batch=batch).content)
    shown = {
        (
            Image.objects.get(dataset=batch.dataset, ext_id=e.image).pk,
            Caption.objects.get(dataset=batch.dataset, ext_id=e.caption).pk,
        )
        for e in examples
    }
    pool = golden_pool(batch_id=batch.pk, dataset_id=batch.dataset_id)
    originals = set(
        Caption.objects.filter(dataset=batch.dataset, is_invalid=False).values_list(
            "image_id", "pk"
        )
    )
    yes_pairs = shown & originals
    assert yes_pairs  # the proposal's 100% YES is an image with its own caption
    assert set(pool.golden_tp_pairs) == originals - shown


def test_saving_copies_the_caption_text_from_the_dataset(tiny):
    batch = batch_make(tiny)
    saved = instructions_save(batch=batch, examples=[YES])
    assert saved.content["examples"][0]["caption_text"] == "caption 1"


@pytest.mark.parametrize(
    ("example", "message"),
    [
        (Example(level=Level.YES, image=99, caption=101), "dataset 'tiny' has no image with id 99"),
        (
            Example(level=Level.NO, image=1, caption=7),
            "instructions example for “100% NO”: dataset 'tiny' has no caption with id 7",
        ),
    ],
)
def test_ids_that_are_not_the_datasets_are_refused(tiny, example, message):
    batch = batch_make(tiny)
    with pytest.raises(ServiceError, match=message) as raised:
        instructions_save(batch=batch, examples=[example])
    assert raised.value.field == "instructions"
    assert not Instructions.objects.filter(batch=batch).exists()


def test_another_datasets_ids_are_refused(tiny, dataset):
    batch = batch_make(dataset)  # the synthetic dataset's ids start at 1, tiny's at 0
    with pytest.raises(ServiceError, match="dataset 'small' has no image with id 0"):
        instructions_save(batch=batch, examples=[Example(level=Level.YES, image=0, caption=100)])


def test_an_invalid_caption_is_refused(tiny):
    Caption.objects.filter(dataset=tiny, ext_id=101).update(
        is_invalid=True, invalid_reason="meaningless"
    )
    with pytest.raises(ServiceError, match="caption 101 is marked invalid"):
        instructions_save(batch=batch_make(tiny), examples=[YES])


def test_two_examples_of_one_answer_are_refused(tiny):
    with pytest.raises(ServiceError, match="two examples for “100% YES”"):
        instructions_save(batch=batch_make(tiny), examples=[YES, YES])


def test_the_admin_never_moves_or_renumbers_a_saved_version(tiny, client):
    batch, other = batch_make(tiny), batch_make(tiny)
    first = instructions_save(batch=batch, examples=[YES])
    second = instructions_save(batch=batch, examples=[NO])
    client.force_login(get_user_model().objects.create_superuser("root", password="x" * 12))
    url = reverse("admin:annotation_instructions_change", args=[first.pk])
    client.post(url, {"batch": other.pk, "version": 3, "created_by": ""})
    first.refresh_from_db()
    assert (first.batch_id, first.version) == (batch.pk, 1)
    assert instructions_current(batch=batch) == second


# --- the version each assignment carries -----------------------------------------------------


def test_handed_out_work_carries_the_current_version_and_keeps_it(tiny):
    batch = batch_make(tiny)
    hits = [hit_make(batch, index) for index in range(3)]
    ann, bea = worker_make("ann"), worker_make("bea")
    before = assignment_create(hit=hits[0], worker=ann, now=T0)
    first = instructions_save(batch=batch, examples=[YES])
    taken = hit_assign_next(worker=bea, now=T0)
    second = instructions_save(batch=batch, examples=[NO])
    later = assignment_create(hit=hits[2], worker=ann, now=T0)
    assert before.instructions_id is None
    taken.refresh_from_db()
    assert taken.instructions_id == first.pk  # hit_assign_next stored it, then kept it
    assert later.instructions_id == second.pk


def test_the_mturk_page_stores_the_version_too(tiny):
    batch = batch_make(tiny)
    hit = hit_make(batch, 0)
    saved = instructions_save(batch=batch, examples=[YES])
    opened = mturk_assignment_open(hit=hit, worker_id="A1WORKER", assignment_id="3ASSIGN0001")
    assert opened.instructions_id == saved.pk


def test_handing_out_asks_for_the_version_in_one_query(tiny, django_assert_num_queries):
    from annotation.handout import _assign

    batch = batch_make(tiny)
    hit = hit_make(batch, 0)
    instructions_save(batch=batch, examples=[YES])
    worker = worker_make("ann")
    with django_assert_num_queries(3):  # the version, the insert, the slot hint
        _assign(hit, worker, T0, 0)


# --- the first-time rule --------------------------------------------------------------------


def test_instructions_open_on_the_first_hit_with_a_version_only(tiny):
    batch = batch_make(tiny)
    hits = [hit_make(batch, index) for index in range(4)]
    ann, bea = worker_make("ann"), worker_make("bea")
    instructions_save(batch=batch, examples=[YES])
    first = assignment_create(hit=hits[0], worker=ann, now=T0)
    second = assignment_create(hit=hits[1], worker=ann, now=T0)
    others = assignment_create(hit=hits[0], worker=bea, now=T0)
    instructions_save(batch=batch, examples=[NO])  # a new version: shown again, once
    third = assignment_create(hit=hits[2], worker=ann, now=T0)
    fourth = assignment_create(hit=hits[3], worker=ann, now=T0)
    firsts = [instructions_first_time(assignment=a) for a in (first, second, third, fourth)]
    assert firsts == [True, False, True, False]
    assert instructions_first_time(assignment=others)  # another worker's first


def test_work_without_instructions_never_opens_them_by_itself(tiny):
    batch = batch_make(tiny)
    assignment = assignment_create(hit=hit_make(batch, 0), worker=worker_make("ann"), now=T0)
    assert not instructions_first_time(assignment=assignment)


# --- reading ------------------------------------------------------------------------------


def test_the_page_links_only_examples_whose_image_has_a_file(batch):
    current = instructions_current(batch=batch)
    first = current.content["examples"][0]["image"]
    Image.objects.filter(dataset=batch.dataset, ext_id=first).update(file="")
    shown = instructions_shown(instructions=current, image_url=no_link)
    assert shown["version"] == 1
    links = [example["image_url"] for example in shown["examples"]]
    assert links[0] is None
    assert links[1:] == [no_link(current.pk, index) for index in (1, 2, 3)]


def test_work_from_before_instructions_shows_the_guide_without_examples():
    shown = instructions_shown(instructions=None, image_url=no_link)
    assert shown["version"] is None and shown["examples"] == [] and len(shown["answers"]) == 4


def test_the_overview_counts_the_assignments_of_each_version(tiny):
    batch = batch_make(tiny)
    hits = [hit_make(batch, index) for index in range(3)]
    ann = worker_make("ann")
    assignment_create(hit=hits[0], worker=ann, now=T0)
    instructions_save(batch=batch, examples=[YES])
    assignment_create(hit=hits[1], worker=ann, now=T0)
    assignment_create(hit=hits[1], worker=worker_make("bea"), now=T0)
    instructions_save(batch=batch, examples=[YES, NO])
    overview = instructions_overview(batch=batch, image_url=no_link)
    assert overview["current"]["version"] == 2
    assert [e["level"] for e in overview["current"]["examples"]] == ["yes", "no"]
    rows = [(row["version"], row["examples"], row["assignments"]) for row in overview["versions"]]
    assert rows == [(2, 2, 0), (1, 1, 2)]
    assert overview["without"] == 1


# --- the command -------------------------------------------------------------------------------


def test_the_command_saves_a_version_from_a_file_and_shows_it(tiny, tmp_path):
    batch = batch_make(tiny)
    path = tmp_path / "examples.json"
    path.write_text(json.dumps([YES.to_json() | {"caption_text": ""}, NO.to_json()]))
    out = io.StringIO()
    call_command("batch_instructions", str(batch.pk), "--examples", str(path), stdout=out)
    assert out.getvalue().strip() == f"Batch {batch.pk}: instructions version 1 saved (2 examples)."
    out = io.StringIO()
    call_command("batch_instructions", str(batch.pk), "--show", stdout=out)
    shown = json.loads(out.getvalue())
    assert (shown["batch"], shown["version"]) == (batch.pk, 1)
    assert [e["caption"] for e in shown["examples"]] == [101, 105]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[{", "examples.json:1: invalid JSON"),
        ('[{"level": "sure", "image": 1, "caption": 101}]', "`level` must be one of"),
        ('[{"level": "yes", "image": 1, "caption": 7}]', "has no caption with id 7"),
    ],
)
def test_the_command_refuses_a_bad_file_saying_why(tiny, tmp_path, content, message):
    batch = batch_make(tiny)
    path = tmp_path / "examples.json"
    path.write_text(content)
    with pytest.raises(CommandError, match=message):
        call_command("batch_instructions", str(batch.pk), "--examples", str(path))
    assert not Instructions.objects.filter(batch=batch).exists()


def test_the_command_reads_utf8_with_a_bom_and_refuses_other_bytes(tiny, tmp_path):
    batch = batch_make(tiny)
    path = tmp_path / "examples.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps([YES.to_json() | {"note": "“Yes”"}]).encode())
    call_command("batch_instructions", str(batch.pk), "--examples", str(path), stdout=io.StringIO())
    assert instructions_current(batch=batch).content["examples"][0]["note"] == "“Yes”"
    path.write_bytes(b'[{"level": "yes", "note": "\xff"}]')
    with pytest.raises(CommandError, match=r"examples\.json: not UTF-8 text"):
        call_command("batch_instructions", str(batch.pk), "--examples", str(path))


def test_the_command_says_when_there_is_nothing_to_show(tiny):
    batch = batch_make(tiny)
    with pytest.raises(CommandError, match="has no instructions yet"):
        call_command("batch_instructions", str(batch.pk))
    with pytest.raises(CommandError, match="no batch with id 999"):
        call_command("batch_instructions", "999")
