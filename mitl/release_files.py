"""Release files: ECCV-format positives, judgements, verdicts and statistics, written atomically.

Pure Python. A release directory appears complete or not at all: files are written to a
hidden sibling directory and renamed into place once the manifest and the zip of the
whole release are written. Layout under RELEASES_DIR/<name>/:

    <version>/             image_to_caption.json, caption_to_image.json (ECCV Caption),
                           judgements.jsonl, verdicts.csv, stats.json, manifest.json,
                           and the extra files (README.md, qrels_*.txt, reports, …)
    <version>.zip          the same files under <name>-v<version>/
    <version>.zip.sha256   the zip's checksum, in `sha256sum` format
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import shutil
import tempfile
import zipfile
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

I2T_FILE = "image_to_caption.json"
T2I_FILE = "caption_to_image.json"
JUDGEMENTS_FILE = "judgements.jsonl"
STATS_FILE = "stats.json"
MANIFEST_FILE = "manifest.json"
VERDICTS_FILE = "verdicts.csv"
QRELS_I2T_FILE = "qrels_i2t.txt"
QRELS_T2I_FILE = "qrels_t2i.txt"
DATASHEET_FILE = "README.md"
DIVERSITY_FILE = "diversity.json"
BIAS_JSON_FILE = "bias_report.json"
BIAS_HTML_FILE = "bias_report.html"
STANDARD_FILES = frozenset(
    {I2T_FILE, T2I_FILE, JUDGEMENTS_FILE, STATS_FILE, MANIFEST_FILE, VERDICTS_FILE}
)
# `evaluate` reads the score column for graded nDCG: keep the names and their order.
VERDICT_COLUMNS: tuple[str, ...] = (
    "image_id",
    "caption_id",
    "rule",
    "is_positive",
    "score",
    "confidence",
    "n_judgements",
    "yes",
    "weak_yes",
    "weak_no",
    "no",
    "batches",  # the batches whose judgements decided the pair, space-separated
    "rounds",  # every batch:round that chose the pair
)

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


def bundle_path(release_dir: Path) -> Path:
    """Return where the zip of a release directory lives: `<name>/<version>.zip` beside it."""
    return release_dir.parent / f"{release_dir.name}.zip"


def bundle_checksum_path(release_dir: Path) -> Path:
    """Return the `sha256sum`-style file that holds the zip's checksum, beside the zip."""
    return release_dir.parent / f"{release_dir.name}.zip.sha256"


def write_release_dir(
    final_dir: Path,
    *,
    i2t: PositivesByQuery,
    t2i: PositivesByQuery,
    judgements: Iterable[Mapping[str, Any]],
    stats: Mapping[str, Any],
    manifest: Mapping[str, Any],
    reports: Mapping[str, Any] | None = None,
    verdicts: Iterable[Mapping[str, Any]] = (),
    text_files: Mapping[str, str] | None = None,
    bundle_root: str | None = None,
) -> dict[str, Any]:
    """Write a release into `final_dir` (which must not exist) and its zip; return the manifest.

    `reports` maps extra JSON file names (e.g. "diversity.json") to their content;
    `verdicts` are rows of `verdicts.csv` (keys: `VERDICT_COLUMNS`); `text_files` maps
    extra file names (README.md, qrels, an HTML report, …) to their text. The zip
    (`bundle_path`) holds every file, manifest included, under the folder `bundle_root`
    (default: the directory's name); its checksum goes to `bundle_checksum_path`, since
    the manifest inside the zip cannot hold it.
    """
    text_files = dict(text_files or {})
    for file_name in [*(reports or {}), *text_files]:
        _check_extra_name(file_name)
    both = sorted(set(reports or {}) & set(text_files))
    if both:
        raise ValueError(f"extra release file {both[0]!r} is given twice")
    zip_path, checksum_path = bundle_path(final_dir), bundle_checksum_path(final_dir)
    for path in (final_dir, zip_path, checksum_path):
        if path.exists():
            raise FileExistsError(f"{path} already exists; releases are immutable")
    final_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{final_dir.name}-", dir=final_dir.parent))
    zip_staging = staging.with_name(staging.name + ".zip")
    checksum_staging = staging.with_name(staging.name + ".zip.sha256")
    placed: list[Path] = []
    try:
        _write_json(staging / I2T_FILE, i2t)
        _write_json(staging / T2I_FILE, t2i)
        with (staging / JUDGEMENTS_FILE).open("w", encoding="utf-8") as handle:
            for row in judgements:
                handle.write(json.dumps(row, sort_keys=True) + "\n")
        _write_verdicts(staging / VERDICTS_FILE, verdicts)
        _write_json(staging / STATS_FILE, stats)
        for file_name, content in (reports or {}).items():
            _write_json(staging / file_name, content)
        for file_name, text in text_files.items():
            (staging / file_name).write_text(text, encoding="utf-8")
        files = {
            path.name: {"sha256": file_sha256(path), "bytes": path.stat().st_size}
            for path in sorted(staging.iterdir())
        }
        full_manifest = {**manifest, "files": files}
        _write_json(staging / MANIFEST_FILE, full_manifest)
        _write_zip(zip_staging, staging, bundle_root or final_dir.name)
        checksum_staging.write_text(f"{file_sha256(zip_staging)}  {zip_path.name}\n")
        os.chmod(staging, 0o755)
        for source, target in (
            (staging, final_dir),
            (zip_staging, zip_path),
            (checksum_staging, checksum_path),
        ):
            os.rename(source, target)
            placed.append(target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        for path in (zip_staging, checksum_staging, *placed):
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
        raise
    return full_manifest


def _check_extra_name(file_name: str) -> None:
    """Refuse an extra file name that is a path, hidden, or one of the standard files."""
    if (
        not file_name
        or file_name != Path(file_name).name
        or file_name.startswith(".")
        or file_name in STANDARD_FILES
    ):
        raise ValueError(
            f"extra release file {file_name!r} must be a plain file name other than "
            f"{', '.join(sorted(STANDARD_FILES))}"
        )


def _write_verdicts(path: Path, rows: Iterable[Mapping[str, Any]]) -> None:
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=VERDICT_COLUMNS, lineterminator="\n")
        writer.writeheader()
        for row in rows:
            writer.writerow({column: row[column] for column in VERDICT_COLUMNS})


def _write_zip(zip_path: Path, folder: Path, root: str) -> None:
    """Zip every file of `folder` under `root/`, byte-identical for identical content."""
    with zipfile.ZipFile(zip_path, "w", compression=zipfile.ZIP_DEFLATED) as bundle:
        for path in sorted(folder.iterdir()):
            # A fixed timestamp and mode: the same release content gives the same zip.
            info = zipfile.ZipInfo(f"{root}/{path.name}", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            with path.open("rb") as source, bundle.open(info, "w") as target:
                shutil.copyfileobj(source, target, 1 << 20)


def _write_json(path: Path, data: Any) -> None:
    with path.open("w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=1, sort_keys=True)
        handle.write("\n")


def file_sha256(path: Path) -> str:
    """Return a file's sha256, read in blocks (release files can be large)."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
