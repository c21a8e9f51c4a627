"""Every registered annotator kind loads, and the web process never imports torch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mitl.annotators import ANNOTATOR_KINDS, AnnotatorError, annotator_class

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("kind", sorted(ANNOTATOR_KINDS))
def test_every_registered_kind_imports_its_class(kind):
    assert annotator_class(kind).kind == kind


def test_the_blueprints_five_kinds_and_exported_embeddings_are_registered():
    assert set(ANNOTATOR_KINDS) == {
        "bow", "embeddings", "object_labels", "open_clip", "precomputed", "text_embedding",
    }  # fmt: skip


def test_an_unknown_kind_names_the_known_ones():
    with pytest.raises(AnnotatorError, match="known: bow, embeddings, object_labels"):
        annotator_class("vilt")


def test_django_starts_without_importing_torch():
    code = (
        "import os, sys; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'config.settings');"
        "import django; django.setup(); import config.urls, pipeline.tasks, mitl.annotators;"
        "heavy = ('torch', 'open_clip', 'sentence_transformers');"
        "print(sorted(m for m in heavy if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
