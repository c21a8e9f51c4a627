"""Release files: ECCV-format positives, judgements and statistics, written atomically.

Pure Python. A release directory appears complete or not at all: files are written to a
hidden sibling directory and renamed into place once the manifest is written.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

I2T_FILE = "image_to_caption.json"
T2I_FILE = "caption_to_image.json"
JUDGEMENTS_FILE = "judgements.jsonl"
STATS_FILE = "stats.json"
MANIFEST_FILE = "manifest.json"

PositivesByQuery = dict[str, list[int]]


def positives_by_query(
    pairs: Iterable[tuple[int, int]],
    *,
    image_queries: Sequence[int],
    caption_queries: Sequence[int],
) -> tuple[PositivesByQuery, PositivesByQuery]:
    """Return ECCV-format {query id: sorted positive ids} for image and caption queries.

    Every query appears, even one without a positive, so a release says which queries it
    covers. Keys are strings, as JSON requires.
    """
    captions_of: dict[int, set[int]] = defaultdict(set)
    images_of: dict[int, set[int]] = defaultdict(set)
    for image, caption in pairs:
        captions_of[image].add(caption)
        images_of[caption].add(image)
    i2t = {str(q): sorted(captions_of.get(q, ())) for q in sorted(image_queries)}
    t2i = {str(q): sorted(images_of.get(q, ())) for q in sorted(caption_queries)}
    return i2t, t2i


def positive_counts(before: PositivesByQuery, after: PositivesByQuery) -> dict[str, float]:
    """Summarise positives per query before and after curation (ECCV Caption Table 3 style)."""
    n_before = sum(len(v) for v in before.values())
    n_after = sum(len(v) for v in after.values())
    queries = max(len(after), 1)
    return {
        "queries": len(after),
        "positives_original": n_before,
        "positives_extended": n_after,
        "per_query_original": n_before / queries,
        "per_query_extended": n_after / queries,
        "factor": n_after / n_before if n_before else float("nan"),
    }


def write_release_dir(
    final_dir: Path,
    *,
    i2t: PositivesByQuery,
    t2i: PositivesByQuery,
    judgements: Iterable[Mapping[str, Any]],
    stats: Mapping[str, Any],
    manifest: Mapping[str, Any],
    reports: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Write a release into `final_dir` (which must not exist); return the full manifest.

    `reports` maps extra JSON file names (e.g. "diversity.json") to their content.
    """
    if final_dir.exists():
        raise FileExistsError(f"{final_dir} already exists; releases are immutable")
    final_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{final_dir.name}-", dir=final_dir.parent))
    try:
        _write_json(staging / I2T_FILE, i2t)
        _write_json(staging / T2I_FILE, t2i)
        with (staging / JUDGEMENTS_FILE).open("w", encoding="utf-8") as handle:
            for row in judgements:
                handle.write(json.dumps(row, sort_keys=True) + "\n")
        _write_json(staging / STATS_FILE, stats)
        for file_name, content in (reports or {}).items():
            _write_json(staging / file_name, content)
        files = {
            path.name: {"sha256": _sha256(path), "bytes": path.stat().st_size}
            for path in sorted(staging.iterdir())
        }
        full_manifest = {**manifest, "files": files}
        _write_json(staging / MANIFEST_FILE, full_manifest)
        os.chmod(staging, 0o755)
        os.rename(staging, final_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return full_manifest


def _write_json(path: Path, data: Any) -> None:
    with path.open("w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=1, sort_keys=True)
        handle.write("\n")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
