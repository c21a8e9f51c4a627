"""A batch's instructions: proposing worked examples, saving versions, and reading them back.

Each save is a new version (`Instructions`, 1, 2, …) holding a frozen snapshot
(`mitl.instructions.instructions_content`); every assignment points at the version that
was current when it was handed out (`handout._assign`), so what a worker was shown never
changes afterwards. A worker's first HIT with a version opens the instructions by itself
(`instructions_first_time`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import Count, Max, QuerySet

from mitl.instructions import (
    Example,
    ExamplesError,
    examples_check_levels,
    examples_sorted,
    instructions_content,
)
from mitl.judgements import LEVEL_LABELS, Level
from mitl.synthetic.examples import synthetic_examples

from .errors import ServiceError
from .models import Assignment, Batch, Caption, Dataset, Image, Instructions
from .prepared import Prepared
from .synthetic import synthetic_regenerate

FIELD = "instructions"  # the input a ServiceError of this module is about
# Other images' captions tried for a "100% NO" example, looking for one whose image has no
# object label in common with the "100% YES" image (each is one query, at an offset).
NO_CANDIDATES = 8
# The notes of the examples proposed for a dataset without a known truth.
YES_NOTE = "This description was written for this image: everything it says is in it."
NO_NOTE = "This description was written for another image: what it describes is not in this one."

# (instructions id, an example's index in its snapshot) → the link to the example's image
ImageUrl = Callable[[int, int], str]


# --- proposing examples -------------------------------------------------------------------


def instructions_examples_propose(*, dataset: Dataset, seed: int = 0) -> list[Example]:
    """Propose worked examples from the dataset, for an admin to confirm or change.

    A synthetic dataset's truth is known: one clear pair per answer, the middle answers
    with their reasons and a note that explains them. Elsewhere only two answers are
    certain enough to propose: "100% YES" (an image with one of its own captions) and
    "100% NO" (a caption written for another image); the middle ones are the admin's.
    """
    if dataset.meta.get("synthetic"):
        return _synthetic_proposal(dataset, seed)
    return _plain_proposal(dataset, seed)


def _synthetic_proposal(dataset: Dataset, seed: int) -> list[Example]:
    generated = synthetic_regenerate(dataset=dataset)
    images = set(Image.objects.filter(dataset=dataset).values_list("ext_id", flat=True))
    captions = set(
        Caption.objects.filter(dataset=dataset, is_invalid=False).values_list("ext_id", flat=True)
    )
    return synthetic_examples(generated, seed=seed, images=images, captions=captions)


def _plain_proposal(dataset: Dataset, seed: int) -> list[Example]:
    own = Caption.objects.filter(dataset=dataset, is_invalid=False, image__isnull=False)
    with_files = own.exclude(image__file="")
    pool = with_files if with_files.exists() else own
    rng = np.random.default_rng(seed)
    total = pool.count()
    if not total:
        return []
    yes = pool.select_related("image").order_by("ext_id")[int(rng.integers(total))]
    no = _other_caption(own.exclude(image=yes.image), yes.image, rng)
    examples = [_example(Level.YES, yes.image, yes, YES_NOTE)]
    return examples + ([_example(Level.NO, yes.image, no, NO_NOTE)] if no else [])


def _example(level: Level, image: Image, caption: Caption, note: str) -> Example:
    return Example(
        level=level,
        image=image.ext_id,
        caption=caption.ext_id,
        caption_text=caption.text,
        note=note,
    )


def _other_caption(
    others: QuerySet[Caption], image: Image, rng: np.random.Generator
) -> Caption | None:
    """A caption of another image, preferably one sharing no object label with `image`."""
    total = others.count()
    if not total:
        return None
    ordered = others.select_related("image").order_by("ext_id")
    labels = set(image.labels or [])
    tries = min(NO_CANDIDATES if labels else 1, total)  # without labels, any will do
    drawn = [ordered[int(i)] for i in rng.integers(total, size=tries)]
    disjoint = [c for c in drawn if not labels & set(c.image.labels or [])]
    return (disjoint or drawn)[0]


# --- saving versions ------------------------------------------------------------------------


def instructions_save(
    *, batch: Batch, examples: Sequence[Example], user: AbstractBaseUser | None = None
) -> Instructions:
    """Save the batch's instructions with these examples as its next version.

    Every example's image and caption must be the batch's dataset's own (by their dataset
    ids), the caption not marked invalid; its text is copied from the dataset. Raise
    ServiceError (field "instructions") saying which example is wrong.
    """
    try:
        examples_check_levels(examples)
    except ExamplesError as exc:
        raise ServiceError(f"instructions: {exc}", field=FIELD) from None
    with transaction.atomic():
        # Versions of one batch are numbered one save at a time.
        Batch.objects.select_for_update(no_key=True).filter(pk=batch.pk).exists()
        checked = _examples_checked(batch.dataset, examples)
        last = Instructions.objects.filter(batch=batch).aggregate(last=Max("version"))["last"]
        return Instructions.objects.create(
            batch=batch,
            version=(last or 0) + 1,
            content=instructions_content(checked),
            created_by=user,
        )


def _examples_checked(dataset: Dataset, examples: Sequence[Example]) -> list[Example]:
    """Return the examples with their caption text from the dataset; refuse foreign ids."""
    images = set(
        Image.objects.filter(dataset=dataset, ext_id__in=[e.image for e in examples]).values_list(
            "ext_id", flat=True
        )
    )
    captions = {
        ext_id: (text, invalid)
        for ext_id, text, invalid in Caption.objects.filter(
            dataset=dataset, ext_id__in=[e.caption for e in examples]
        ).values_list("ext_id", "text", "is_invalid")
    }
    checked = []
    for example in examples_sorted(examples):
        where = f"instructions example for “{LEVEL_LABELS[example.level]}”"
        if example.image not in images:
            raise ServiceError(
                f"{where}: dataset {dataset.name!r} has no image with id {example.image}",
                field=FIELD,
            )
        if example.caption not in captions:
            raise ServiceError(
                f"{where}: dataset {dataset.name!r} has no caption with id {example.caption}",
                field=FIELD,
            )
        text, invalid = captions[example.caption]
        if invalid:
            raise ServiceError(
                f"{where}: caption {example.caption} is marked invalid; choose another one",
                field=FIELD,
            )
        checked.append(replace(example, caption_text=text))
    return checked


# --- reading them ---------------------------------------------------------------------------


def instructions_current(*, batch: Batch) -> Instructions | None:
    """Return the batch's latest version of its instructions, or None before the first."""
    return Instructions.objects.filter(batch=batch).order_by("-version").first()


def instructions_current_id(*, batch_id: int) -> int | None:
    """Return the id of the batch's latest version (one query: the hand-out asks it)."""
    latest = _LATEST_VERSION.rows(batch_id)
    return latest[0][0] if latest else None


# Every hand-out asks it: built once (annotation.prepared).
_LATEST_VERSION = Prepared(
    lambda batch_id: (
        Instructions.objects.filter(batch_id=batch_id).order_by("-version").values_list("pk")[:1]
    ),
    1,
)


def instructions_first_time(*, assignment: Assignment) -> bool:
    """Tell whether this is the worker's first assignment with its version of instructions.

    Work handed out before the batch had instructions carries none: False.
    """
    if assignment.instructions_id is None:
        return False
    return not Assignment.objects.filter(
        worker_id=assignment.worker_id,
        instructions_id=assignment.instructions_id,
        pk__lt=assignment.pk,
    ).exists()


def instructions_shown(*, instructions: Instructions | None, image_url: ImageUrl) -> dict[str, Any]:
    """Return what a HIT page shows: the stored snapshot, each example with its image link.

    Without a version (work from before the batch had instructions), the guide as it reads
    today, without examples. An example whose image has no file gets no link.
    """
    if instructions is None:
        return {"version": None, **instructions_content([])}
    content = instructions.content
    ext_ids = [example["image"] for example in content["examples"]]
    with_file = set(
        _batch_images(instructions)
        .filter(ext_id__in=ext_ids)
        .exclude(file="")
        .values_list("ext_id", flat=True)
    )
    examples = [
        {
            **example,
            "image_url": image_url(instructions.pk, index)
            if example["image"] in with_file
            else None,
        }
        for index, example in enumerate(content["examples"])
    ]
    return {**content, "version": instructions.version, "examples": examples}


def instructions_example_image(*, instructions: Instructions, index: int) -> Image | None:
    """Return the image of the snapshot's example `index`, or None when there is none."""
    examples = instructions.content.get("examples", [])
    if not 0 <= index < len(examples):
        return None
    return _batch_images(instructions).filter(ext_id=examples[index]["image"]).first()


def _batch_images(instructions: Instructions) -> QuerySet[Image]:
    """The images of the instructions' batch's dataset (no query for the batch itself)."""
    return Image.objects.filter(dataset__batches=instructions.batch_id)


def instructions_overview(*, batch: Batch, image_url: ImageUrl) -> dict[str, Any]:
    """Return the batch page's view: the current version with its examples (with thumbnail
    links), and how many assignments carry each version."""
    versions = list(Instructions.objects.filter(batch=batch).order_by("-version"))
    counts = dict(
        Assignment.objects.filter(hit__batch=batch)
        .values("instructions_id")
        .annotate(n=Count("pk"))
        .values_list("instructions_id", "n")
    )
    current = versions[0] if versions else None
    return {
        "current": current and instructions_shown(instructions=current, image_url=image_url),
        "versions": [
            {
                "version": row.version,
                "created_at": row.created_at,
                "created_by": row.created_by,
                "examples": len(row.content.get("examples", [])),
                "assignments": counts.get(row.pk, 0),
            }
            for row in versions
        ],
        "without": counts.get(None, 0),
    }
