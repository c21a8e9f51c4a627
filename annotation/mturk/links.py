"""Links that MTurk's workers open: the platform's public base URL, and signed paths for
people without an account (the HIT page inside MTurk, its images, and the images of the
qualification test that MTurk shows).

The signature (Django's signing, from SECRET_KEY) keeps HIT pages and images from being
enumerated; rotating the key breaks the links of published HITs.
"""

from __future__ import annotations

from django.conf import settings
from django.core.signing import Signer
from django.urls import reverse
from django.utils.crypto import constant_time_compare

from annotation.models import HIT

from .errors import MTurkError, MTurkInputError
from .protocol import external_base_url

_HIT_SALT = "mitl.mturk.hit"
_IMAGE_SALT = "mitl.mturk.image"
_QUALIFICATION_IMAGE_SALT = "mitl.mturk.qualification-image"
_INSTRUCTIONS_IMAGE_SALT = "mitl.mturk.instructions-image"
_PAGE_IMAGE_SALT = "mitl.mturk.page-image"


def hit_signature(hit_id: int) -> str:
    """Return the signature in a HIT page's URL."""
    return Signer(salt=_HIT_SALT).signature(str(hit_id))


def image_signature(item_id: int) -> str:
    """Return the signature in a HIT item's image URL."""
    return Signer(salt=_IMAGE_SALT).signature(str(item_id))


def qualification_image_signature(pair_id: int) -> str:
    """Return the signature in a qualification pair's image URL (the pairs are not HIT items)."""
    return Signer(salt=_QUALIFICATION_IMAGE_SALT).signature(str(pair_id))


_SIGNATURES = {
    "hit": hit_signature,
    "image": image_signature,
    "qualification_image": qualification_image_signature,
}


def signature_valid(*, kind: str, pk: int, signature: str) -> bool:
    """Say whether `signature` signs HIT `pk` (kind "hit"), item `pk`'s image ("image") or
    qualification pair `pk`'s image ("qualification_image")."""
    return constant_time_compare(_SIGNATURES[kind](pk), signature)


def hit_page_path(hit: HIT) -> str:
    """Return the path of a HIT's page inside MTurk (its ExternalQuestion URL, less the base)."""
    return reverse("frontend:mturk-hit", args=[hit.pk, hit_signature(hit.pk)])


def image_path(item_id: int) -> str:
    """Return the signed path of a HIT item's image (the offline layout's CSV names items by
    id: its HITs never change their pairs, so their ids run in one block)."""
    return reverse("frontend:mturk-image", args=[item_id, image_signature(item_id)])


def page_image_signature(hit_id: int, assignment_id: int, number: int) -> str:
    """Return the signature in the image URL of pair `number` of a HIT page inside MTurk
    (assignment 0: the preview)."""
    return Signer(salt=_PAGE_IMAGE_SALT).signature(f"{hit_id}:{assignment_id}:{number}")


def page_image_valid(*, hit_id: int, assignment_id: int, number: int, signature: str) -> bool:
    """Say whether `signature` signs that pair's image of that HIT page."""
    return constant_time_compare(page_image_signature(hit_id, assignment_id, number), signature)


def page_image_path(hit_id: int, assignment_id: int | None, number: int) -> str:
    """Return the signed path of the image of pair `number` of a HIT page inside MTurk: by
    its number on the page (`annotation.pages`), never by the item's id. No assignment: the
    preview, in the HIT's order."""
    assignment = assignment_id or 0
    signature = page_image_signature(hit_id, assignment, number)
    return reverse("frontend:mturk-page-image", args=[hit_id, assignment, number, signature])


def qualification_image_path(pair_id: int) -> str:
    """Return the signed path of a qualification pair's image (MTurk's test shows it)."""
    return reverse(
        "frontend:mturk-qualification-image",
        args=[pair_id, qualification_image_signature(pair_id)],
    )


def instructions_image_signature(instructions_id: int, example: int) -> str:
    """Return the signature in the image URL of an instructions version's example."""
    return Signer(salt=_INSTRUCTIONS_IMAGE_SALT).signature(f"{instructions_id}:{example}")


def instructions_image_valid(*, instructions_id: int, example: int, signature: str) -> bool:
    """Say whether `signature` signs that example's image of that instructions version."""
    return constant_time_compare(instructions_image_signature(instructions_id, example), signature)


def instructions_image_path(instructions_id: int, example: int) -> str:
    """Return the signed path of an instructions example's image (the MTurk page shows it)."""
    signature = instructions_image_signature(instructions_id, example)
    return reverse("frontend:mturk-instructions-image", args=[instructions_id, example, signature])


def public_base_url(base_url: str | None = None, *, production: bool) -> str:
    """Return the checked public base URL: `base_url`, else MTURK_EXTERNAL_BASE_URL."""
    try:
        return external_base_url(
            settings.MTURK_EXTERNAL_BASE_URL if base_url is None else base_url,
            production=production,
        )
    except MTurkInputError as exc:
        raise MTurkError(str(exc)) from exc
