"""The crowd-form layout of the offline path, for MTurk's web UI (Design Layout → Source).

Rendered from `annotation/mturk/layout.html`; no database, no boto3.
"""

from __future__ import annotations

import json

from django.template.loader import render_to_string

from mitl.judgements import (
    LEVEL_LABELS,
    SHORTCOMING_LABELS,
    SHORTCOMINGS,
    WRONG_CONCEPT_LABELS,
    WRONG_CONCEPTS,
    Level,
)

LAYOUT_TEMPLATE = "annotation/mturk/layout.html"


def layout_html(*, pairs: int, followups: bool) -> str:
    """Return the crowd-form layout with `pairs` pair blocks.

    Each pair is a block with the four answers (radio `level_N`) and, for the middle
    answers, the reasons (`why_N_<reason>`, `concept_N_<concept>`, `other_N`). A script
    keeps the hidden field `answers` up to date with every answer as JSON, in the platform's
    submit format; the results importer reads it, or the single fields when it is missing.
    """
    context = {
        "pairs": range(1, pairs + 1),
        "followups": followups,
        "levels": [(level.value, LEVEL_LABELS[level]) for level in Level],
        "shortcomings": list(SHORTCOMING_LABELS.items()),
        "wrong_concepts": list(WRONG_CONCEPT_LABELS.items()),
        # Read by the layout's script, so JSON; the values are the platform's own codes.
        "middle_levels": json.dumps([Level.WEAK_YES.value, Level.WEAK_NO.value]),
        "shortcoming_codes": json.dumps(list(SHORTCOMINGS)),
        "concept_codes": json.dumps(list(WRONG_CONCEPTS)),
    }
    return render_to_string(LAYOUT_TEMPLATE, context)
