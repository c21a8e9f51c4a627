"""The wizard's "Instructions examples": one row per answer, the examples workers are shown.

wizard_instructions.js fills the rows with the examples proposed for the chosen dataset
(`frontend:batch-instructions-proposal`); the admin may change or clear any row. Rows left
all empty mean "use the proposal" (also what a browser without scripts sends). Ids that
are not the dataset's are refused when the batch is created, on this section of the form.
"""

from __future__ import annotations

from typing import Any

from django import forms

from mitl.instructions import ID_MAX, Example, ExamplesError, parse_examples
from mitl.judgements import (
    LEVEL_LABELS,
    MIDDLE_LEVELS,
    SHORTCOMING_LABELS,
    WRONG_CONCEPT_LABELS,
    Level,
)

PREFIX = "examples"


def _id_field(what: str) -> forms.IntegerField:
    return forms.IntegerField(
        required=False,
        min_value=0,
        max_value=ID_MAX,  # a larger one would not even fit the database's query
        label=f"{what} id",
        widget=forms.NumberInput(attrs={"min": 0, "step": 1}),
    )


class InstructionsExamplesForm(forms.Form):
    """Image id, caption id and note per answer; the middle answers also their reasons."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("prefix", PREFIX)
        kwargs.setdefault("label_suffix", "")
        super().__init__(*args, **kwargs)
        for level in Level:
            self.fields[f"{level.value}_image"] = _id_field("Image")
            self.fields[f"{level.value}_caption"] = _id_field("Caption")
            self.fields[f"{level.value}_note"] = forms.CharField(
                required=False,
                label="Note",
                widget=forms.Textarea(attrs={"rows": 2}),
                help_text="Why this is the right answer; the workers read it.",
            )
            if level in MIDDLE_LEVELS:
                self.fields[f"{level.value}_shortcomings"] = _choices(SHORTCOMING_LABELS, "Why")
                self.fields[f"{level.value}_wrong_concepts"] = _choices(
                    WRONG_CONCEPT_LABELS, "Wrong concept"
                )

    def rows(self) -> list[dict[str, Any]]:
        """Return the bound fields of each answer's row, for the template."""
        rows = []
        for level in Level:
            names = ("image", "caption", "note", "shortcomings", "wrong_concepts")
            row = {name: self[f"{level.value}_{name}"] for name in names if self._has(level, name)}
            rows.append({"level": level.value, "label": LEVEL_LABELS[level], **row})
        return rows

    def _has(self, level: Level, name: str) -> bool:
        return f"{level.value}_{name}" in self.fields

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        entries = []
        for level in Level:
            entry = self._entry(data, level)
            if entry is not None:
                entries.append(entry)
        try:
            data["examples"] = parse_examples(entries) if entries else None
        except ExamplesError as exc:
            raise forms.ValidationError(str(exc)) from None
        return data

    def _entry(self, data: dict[str, Any], level: Level) -> dict[str, Any] | None:
        """One row as `parse_examples` reads it; None for an empty row."""
        key = level.value
        image, caption = data.get(f"{key}_image"), data.get(f"{key}_caption")
        note = data.get(f"{key}_note") or ""
        reasons = list(data.get(f"{key}_shortcomings") or [])
        concepts = list(data.get(f"{key}_wrong_concepts") or [])
        if image is None and caption is None:
            if note or reasons or concepts:
                self.add_error(f"{key}_image", "Give the image and caption ids, or clear the row.")
            return None
        if image is None or caption is None:
            missing = f"{key}_image" if image is None else f"{key}_caption"
            self.add_error(missing, "Give both an image id and a caption id, or clear the row.")
            return None
        entry = {"level": key, "image": image, "caption": caption, "note": note}
        return entry | {"shortcomings": reasons, "wrong_concepts": concepts}

    def examples(self) -> list[Example] | None:
        """Return the examples the admin chose, or None to use the proposal (all rows empty)."""
        return self.cleaned_data.get("examples")


def _choices(labels: dict[str, str], label: str) -> forms.MultipleChoiceField:
    return forms.MultipleChoiceField(
        choices=list(labels.items()),
        required=False,
        label=label,
        widget=forms.CheckboxSelectMultiple,
    )


def examples_initial(examples: list[Example]) -> dict[str, Any]:
    """Return an InstructionsExamplesForm's initial data showing these examples (one per row)."""
    initial: dict[str, Any] = {}
    for example in examples:
        key = example.level.value
        initial |= {
            f"{key}_image": example.image,
            f"{key}_caption": example.caption,
            f"{key}_note": example.note,
        }
        if example.level in MIDDLE_LEVELS:
            initial[f"{key}_shortcomings"] = list(example.shortcomings)
            initial[f"{key}_wrong_concepts"] = list(example.wrong_concepts)
    return initial
