"""What the benchmark scripts share: the project on the path, Django, data, measurements.

The scripts run as files from the repository root, so Python puts `benchmarks/` on the
path, not the root; importing this module adds the root, so the project imports after it.
Nothing here imports Django at module level: two benchmarks run without it.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import resource
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

if TYPE_CHECKING:
    from annotation.models import Dataset

MIB = 1 << 20
BULK_BATCH = 5000  # rows per INSERT, as the services use

T = TypeVar("T")


# --------------------------------------------------------------------------- set-up


def django_setup() -> None:
    """Set Django up with the project's settings (set DATABASE_URL before, if at all)."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()


def dataset_create(
    *, name: str, description: str, n_images: int, captions_per_image: int, caption_text: str
) -> tuple[Dataset, list[int], list[int]]:
    """Create a dataset of images without files, each with `captions_per_image` captions.

    Image n has ext id n; its caption j has ext id n * captions_per_image + j and the text
    `caption_text.format(n=n, j=j)`. Returns the dataset, the image pks and the caption pks,
    both in ext id order (so the captions are grouped by image).
    """
    from annotation.models import Caption, Dataset, Image  # after django_setup()

    dataset = Dataset.objects.create(name=name, description=description)
    Image.objects.bulk_create(
        [
            Image(dataset=dataset, ext_id=i, file_name=f"{i:012d}.jpg", labels=[])
            for i in range(n_images)
        ],
        batch_size=BULK_BATCH,
    )
    image_pks = _pks_by_ext_id(Image.objects.filter(dataset=dataset))
    Caption.objects.bulk_create(
        [
            Caption(
                dataset=dataset,
                ext_id=n * captions_per_image + j,
                image_id=image_pk,
                text=caption_text.format(n=n, j=j),
            )
            for n, image_pk in enumerate(image_pks)
            for j in range(captions_per_image)
        ],
        batch_size=BULK_BATCH,
    )
    return dataset, image_pks, _pks_by_ext_id(Caption.objects.filter(dataset=dataset))


def original_positives_create(dataset: Dataset) -> None:
    """Give the dataset its `original` positive set: every caption with its own image."""
    from annotation.models import Caption, PositivePair, PositiveSet, PositiveSource
    from pipeline.bulk import POSITIVE_PAIR_FIELDS, rows_insert

    original = PositiveSet.objects.create(
        dataset=dataset, name="original", source=PositiveSource.ORIGINAL
    )
    pairs = Caption.objects.filter(dataset=dataset).values_list("image_id", "pk")
    rows_insert(PositivePair, POSITIVE_PAIR_FIELDS, [(original.pk, *pair) for pair in pairs])


def _pks_by_ext_id(rows: Any) -> list[int]:
    return list(rows.order_by("ext_id").values_list("pk", flat=True))


# --------------------------------------------------------------------------- timing


def seconds(work: Callable[[], Any]) -> float:
    """Return the wall-clock seconds of one run of `work` (its result is dropped untimed)."""
    gc.collect()
    start = time.perf_counter()
    result = work()
    elapsed = time.perf_counter() - start
    del result
    return elapsed


def alternate(repeats: int, sides: dict[str, Callable[[], T]]) -> dict[str, list[T]]:
    """Return what each side's call gave, the sides called in turn so load spikes hit all alike."""
    results: dict[str, list[T]] = {name: [] for name in sides}
    for _ in range(repeats):
        for name, call in sides.items():
            results[name].append(call())
    return results


def threads_run(n: int, run: Callable[[int], None], ready: threading.Barrier) -> None:
    """Run `run(0)` … `run(n - 1)` on threads and wait for them all.

    `ready` has n + 1 parties: this thread waits there too, so the caller's barrier action
    starts the clock once every thread is ready. A thread that fails aborts the barrier
    and records its error for the caller.
    """
    threads = [threading.Thread(target=run, args=(c,), daemon=True) for c in range(n)]
    for thread in threads:
        thread.start()
    with contextlib.suppress(threading.BrokenBarrierError):  # a client failed: joined below
        ready.wait()
    for thread in threads:
        thread.join()


# --------------------------------------------------------------------------- memory


def rss_bytes() -> int:
    """Return the current resident set size."""
    return _status_kb("VmRSS") * 1024


def peak_rss_bytes() -> int:
    """Return the peak resident set size since the last `peak_rss_reset`."""
    return _status_kb("VmHWM") * 1024


def peak_rss_reset() -> bool:
    """Reset the kernel's peak-RSS mark to the current RSS; return False where not allowed."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def maxrss_bytes() -> int:
    """Return this process's lifetime peak RSS (`ru_maxrss`, in KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _status_kb(field: str) -> int:
    """Return a `/proc/self/status` field in kB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


# --------------------------------------------------------------------------- report


def report_line(
    benchmark: str, ratio: float | None, target: float, better: str, **fields: Any
) -> None:
    """Print the report's last line: one JSON object, `ratio` compared with `target`."""
    print(
        json.dumps(
            {"benchmark": benchmark, "ratio": ratio, "target": target, "better": better, **fields}
        )
    )
