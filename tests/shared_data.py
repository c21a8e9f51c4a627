"""Where the project's shared data lives: `../shared` beside the checkout, or the folder
MITL_SHARED_DIR names. Tests that need it skip with a reason when it is not there; no test
names a machine's absolute path."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[1]


def shared_dir() -> Path:
    """Return MITL_SHARED_DIR when set, else `shared/` beside the repository."""
    configured = os.environ.get("MITL_SHARED_DIR")
    return Path(configured) if configured else REPOSITORY.parent / "shared"


COCO5K_CAPTIONS = shared_dir() / "data/coco5k/captions.tsv"
needs_coco5k = pytest.mark.skipif(
    not COCO5K_CAPTIONS.is_file(),
    reason=f"{COCO5K_CAPTIONS} is not there (../shared beside the checkout, or MITL_SHARED_DIR)",
)
