"""Register machine annotators after checking their configuration."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from annotation.errors import ServiceError, StateConflict
from annotation.models import MachineAnnotator
from mitl.annotators import AnnotatorError, build_annotator


def annotator_create(
    *, name: str, kind: str, config: Mapping[str, Any], version: str = "1"
) -> MachineAnnotator:
    """Create an annotator; an identical existing one is returned, a different one refused."""
    try:
        build_annotator(kind=kind, name=name, config=config)  # validates kind and config
    except AnnotatorError as exc:
        raise ServiceError(str(exc)) from exc
    existing = MachineAnnotator.objects.filter(name=name).first()
    if existing is not None:
        if (existing.kind, existing.config, existing.version) != (kind, dict(config), version):
            raise StateConflict(
                f"annotator {name!r} already exists with another kind, config or version"
            )
        return existing
    return MachineAnnotator.objects.create(
        name=name, kind=kind, config=dict(config), version=version
    )
