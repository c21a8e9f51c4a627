"""What one `retrieve_both` call scores: the image rows and the caption columns.

Pure Python: no Django import.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# A block of the score matrix holds about this many scores (128 MiB as float32): big enough for
# the matrix product to run at full speed and to spread the per-block selection cost (fewer
# blocks re-rank fewer running top-k lists), small enough that a block and its selection
# buffers stay well below 1.5 GB whatever the corpus size. At COCO 5K's size half of the
# former 256 MiB ranks about as fast (a little less CPU, fewer fresh pages to fault in) with
# about half the peak memory.
BLOCK_ENTRIES = 1 << 25


@dataclass(frozen=True, eq=False)
class Plan:
    """What one `retrieve_both` call scores, with the queries de-duplicated and sorted."""

    image_queries: np.ndarray  # unique image query rows, ascending
    image_inverse: np.ndarray  # where each of the caller's image queries is in image_queries
    caption_queries: np.ndarray  # unique caption query rows, ascending
    caption_inverse: np.ndarray
    scan: np.ndarray  # image rows scored, ascending
    columns: np.ndarray  # caption rows scored for each scanned image row, ascending
    query_columns: np.ndarray | None  # positions of caption_queries in columns; None: all


def query_plan(images: np.ndarray, captions: np.ndarray, n_images: int, n_captions: int) -> Plan:
    """Return the rows and columns to score for these (range-checked) queries."""
    image_queries, image_inverse = np.unique(images, return_inverse=True)
    caption_queries, caption_inverse = np.unique(captions, return_inverse=True)
    # A caption query ranks every image and an image query every caption; otherwise only
    # what the queries name is scored.
    scan = np.arange(n_images, dtype=np.int64) if len(caption_queries) else image_queries
    if len(image_queries):
        columns = np.arange(n_captions, dtype=np.int64)
        full = len(caption_queries) == n_captions
        query_columns = None if full or not len(caption_queries) else caption_queries
    else:
        columns, query_columns = caption_queries, None
    return Plan(
        image_queries=image_queries,
        image_inverse=image_inverse.reshape(-1),
        caption_queries=caption_queries,
        caption_inverse=caption_inverse.reshape(-1),
        scan=scan,
        columns=columns,
        query_columns=query_columns,
    )


def check_range(rows: np.ndarray, n: int, what: str) -> None:
    """Raise ValueError unless every row lies in 0..n-1."""
    if rows.size and (rows.min() < 0 or rows.max() >= n):
        raise ValueError(f"{what} rows must lie in 0..{n - 1}")
