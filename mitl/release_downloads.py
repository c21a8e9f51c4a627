"""Reading a release directory for its web page: files, datasheet, positives CSV, example.

Pure Python over the layout that `mitl.release_files` writes. A file is served only if
the release's manifest.json lists it (or it is manifest.json itself): a name is looked
up, never joined onto the directory as given, so no path leaves the release.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mitl.release_files import DATASHEET_FILE, I2T_FILE, MANIFEST_FILE, T2I_FILE

POSITIVES_CSV_COLUMNS = ("direction", "query_id", "positive_id")
EXAMPLE_MAX_LENGTH = 100  # ranked targets per query in the example rankings file


@dataclass(frozen=True)
class ReleaseFile:
    """One file of a release as its manifest lists it."""

    name: str
    bytes: int | None
    sha256: str | None


def release_manifest_read(release_dir: Path) -> dict[str, Any]:
    """Return the release's manifest.json, or {} when it is missing or unreadable."""
    try:
        data = json.loads((release_dir / MANIFEST_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def release_files_list(release_dir: Path) -> list[ReleaseFile]:
    """Return every file the manifest lists, by name, and manifest.json itself last."""
    listed = release_manifest_read(release_dir).get("files") or {}
    files = [
        ReleaseFile(name=name, bytes=info.get("bytes"), sha256=info.get("sha256"))
        for name, info in sorted(listed.items())
        if isinstance(info, Mapping) and (release_dir / name).is_file()
    ]
    manifest = release_dir / MANIFEST_FILE
    if manifest.is_file():
        # The manifest cannot hold its own checksum: compute it (the file is small).
        content = manifest.read_bytes()
        files.append(ReleaseFile(MANIFEST_FILE, len(content), hashlib.sha256(content).hexdigest()))
    return files


def release_file_path(release_dir: Path, name: str) -> Path | None:
    """Return the path of a listed file of the release, None for any other name."""
    for listed in release_files_list(release_dir):
        if listed.name == name:
            return release_dir / listed.name
    return None


def release_datasheet_read(release_dir: Path) -> str | None:
    """Return the text of the release's datasheet (README.md), None without one."""
    try:
        return (release_dir / DATASHEET_FILE).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _positives(path: Path) -> dict[str, list[Any]]:
    with path.open("rb") as handle:
        data = json.load(handle)
    return data if isinstance(data, dict) else {}


def positives_csv_lines(release_dir: Path) -> Iterator[str]:
    """Yield the release's positives as CSV lines: direction, query id, positive id.

    Read from the ECCV Caption files, one direction at a time, queries in file order.
    Ids are integers, so no field needs quoting.
    """
    yield ",".join(POSITIVES_CSV_COLUMNS) + "\n"
    for direction, file_name in (("i2t", I2T_FILE), ("t2i", T2I_FILE)):
        for query, positives in _positives(release_dir / file_name).items():
            for positive in positives:
                yield f"{direction},{int(query)},{int(positive)}\n"


def example_rankings_build(
    release_dir: Path,
    *,
    images: Sequence[int] = (),
    captions: Sequence[int] = (),
    max_length: int = EXAMPLE_MAX_LENGTH,
    seed: int = 0,
) -> dict[str, dict[str, list[int]]]:
    """Return a valid rankings file for the release: each query's positives, then others.

    Every query of the release is ranked. After its positives come the direction's other
    targets (the ids the release names on that side and the given dataset `images` and
    `captions`) in a fixed random order, up to `max_length` ids in all: the file stays
    small, and is long enough for the metrics at 10 where the dataset has the ids. Its
    scores are perfect up to that cap: it shows the format, not a model.
    """
    i2t, t2i = _positives(release_dir / I2T_FILE), _positives(release_dir / T2I_FILE)
    image_ids = {int(q) for q in i2t} | {int(p) for ps in t2i.values() for p in ps}
    caption_ids = {int(q) for q in t2i} | {int(p) for ps in i2t.values() for p in ps}
    rng = random.Random(seed)
    return {
        "i2t": _ranked(i2t, sorted(caption_ids | set(captions)), max_length, rng),
        "t2i": _ranked(t2i, sorted(image_ids | set(images)), max_length, rng),
    }


def _ranked(
    positives: Mapping[str, list[Any]], targets: list[int], max_length: int, rng: random.Random
) -> dict[str, list[int]]:
    ranked: dict[str, list[int]] = {}
    for query, ids in positives.items():
        first = [int(i) for i in ids][:max_length]
        chosen = set(first)
        rest = [t for t in targets if t not in chosen]
        rng.shuffle(rest)
        ranked[str(int(query))] = first + rest[: max_length - len(first)]
    return ranked
