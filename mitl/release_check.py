"""Check a written release folder against itself: files, manifest, zip and statistics.

Pure Python over the files `mitl.release_files` writes. Each check returns sentences naming
what is off (an empty list when all is well), so a caller can report every problem at once.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from mitl.release_files import (
    DATASHEET_FILE,
    I2T_FILE,
    JUDGEMENTS_FILE,
    MANIFEST_FILE,
    QRELS_I2T_FILE,
    QRELS_T2I_FILE,
    STANDARD_FILES,
    STATS_FILE,
    T2I_FILE,
    VERDICTS_FILE,
    bundle_checksum_path,
    bundle_path,
    file_sha256,
)

# Every release the pipeline writes holds these, each non-empty.
REQUIRED_FILES = tuple(sorted(STANDARD_FILES | {DATASHEET_FILE, QRELS_I2T_FILE, QRELS_T2I_FILE}))
DIRECTION_FILES = {"i2t": I2T_FILE, "t2i": T2I_FILE}


def release_problems(release_dir: Path) -> list[str]:
    """Return what is off in a release folder: missing or empty files, a manifest or zip
    that disagrees with the files, or statistics that disagree with the released files."""
    missing = [
        name
        for name in REQUIRED_FILES
        if not (release_dir / name).is_file() or (release_dir / name).stat().st_size == 0
    ]
    if missing:
        return [f"release {release_dir}: missing or empty file(s) {', '.join(missing)}"]
    problems = manifest_problems(release_dir)
    problems += zip_problems(release_dir)
    try:
        stats = json.loads((release_dir / STATS_FILE).read_text(encoding="utf-8"))
        problems += stats_problems(release_dir, stats)
    except (ValueError, KeyError, TypeError) as exc:
        problems.append(f"release {release_dir}: unreadable statistics or files ({exc!r})")
    return problems


def manifest_problems(release_dir: Path) -> list[str]:
    """Return the files whose size or checksum differ from the manifest, or that it omits."""
    try:
        listed = json.loads((release_dir / MANIFEST_FILE).read_text(encoding="utf-8"))["files"]
    except (ValueError, KeyError, TypeError):
        return [f"{release_dir / MANIFEST_FILE}: no readable `files` entry"]
    problems = []
    for name, entry in sorted(listed.items()):
        path = release_dir / name
        if not path.is_file():
            problems.append(f"{path}: listed in the manifest but missing")
        elif path.stat().st_size != entry.get("bytes") or file_sha256(path) != entry.get("sha256"):
            problems.append(f"{path}: size or checksum differs from the manifest")
    on_disk = {path.name for path in release_dir.iterdir() if path.is_file()}
    unlisted = sorted(on_disk - set(listed) - {MANIFEST_FILE})
    if unlisted:
        problems.append(f"{release_dir}: file(s) not in the manifest: {', '.join(unlisted)}")
    return problems


def zip_problems(release_dir: Path) -> list[str]:
    """Return what is off with the release's zip: missing, or not matching its checksum."""
    archive, checksum = bundle_path(release_dir), bundle_checksum_path(release_dir)
    if not archive.is_file() or not checksum.is_file():
        return [f"{archive}: the zip or its .sha256 is missing"]
    expected = checksum.read_text(encoding="utf-8").split()[:1]
    if expected != [file_sha256(archive)]:
        return [f"{archive}: checksum differs from {checksum.name}"]
    return []


def stats_problems(release_dir: Path, stats: Mapping[str, Any]) -> list[str]:
    """Return the counts of stats.json that disagree with the released files."""
    problems = []
    for direction, file_name in DIRECTION_FILES.items():
        positives = json.loads((release_dir / file_name).read_text(encoding="utf-8"))
        counted = {
            "queries": len(positives),
            "positives_extended": sum(len(ids) for ids in positives.values()),
        }
        for key, value in counted.items():
            if stats[direction][key] != value:
                problems.append(
                    f"stats.json {direction}.{key} is {stats[direction][key]}, "
                    f"but {file_name} holds {value}"
                )
    with (release_dir / JUDGEMENTS_FILE).open(encoding="utf-8") as lines:
        judgements = sum(1 for line in lines if line.strip())
    # judgements.jsonl keeps every answer; stats.json counts those on invalid captions apart
    counted = stats["judgements"] + stats.get("judgements_on_invalid_captions", 0)
    if counted != judgements:
        problems.append(
            f"stats.json counts {counted} judgements, but {JUDGEMENTS_FILE} holds {judgements}"
        )
    with (release_dir / VERDICTS_FILE).open(encoding="utf-8", newline="") as rows:
        flags = [row["is_positive"] for row in csv.DictReader(rows)]
    verdicts = {"positive": flags.count("1"), "negative": len(flags) - flags.count("1")}
    if dict(stats["verdicts"]) != verdicts:
        problems.append(
            f"stats.json verdicts are {dict(stats['verdicts'])}, "
            f"but {VERDICTS_FILE} holds {verdicts}"
        )
    return problems


def fraction_problems(label: str, values: Mapping[str, float], keys: Iterable[str]) -> list[str]:
    """Return the named values that are not numbers in [0, 1]."""
    return [
        f"{label} {key} is {values.get(key)!r}, not a number in [0, 1]"
        for key in keys
        if not _is_fraction(values.get(key))
    ]


def _is_fraction(value: object) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and not math.isnan(value)
        and 0.0 <= value <= 1.0
    )
