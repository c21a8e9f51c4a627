"""Benchmark exact top-k retrieval in both directions against the fastest product of the scores.

Run from the repository root::

    .venv/bin/python benchmarks/bench_retrieval.py

What it measures: `mitl.retrieval.both.retrieve_both` ("ours") ranking the top 25 captions of
all 5,000 images and the top 25 images of all 25,000 captions from seeded, L2-normalised float32
embeddings of dimension 512 held by a minimal `EmbeddingAnnotator`. The floor is the fastest
way this machine computes the same 125 million scores, without ranking them: the better of
numpy's full product `images @ captions.T` and torch's product block by block into one reused
buffer (as ours computes them), each timed in this process. The three sides run alternately,
3 times each after an untimed warm-up, and the best time of each counts; ratio = ours / floor.
The peak extra memory of ours is measured in a fresh subprocess (peak RSS beyond the inputs,
which sees torch's allocations too) and with `tracemalloc` (numpy's allocations only).

Correctness, not timed: every query of both directions against a stable brute-force ranking
(score descending, then the lower target index), where numpy's and torch's last-bit rounding
may only swap near-ties; and on data with exact ties (small integer vectors, so every score is
an integer computed exactly by both libraries), every query must equal the brute force exactly.
No Django, no database. The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import tracemalloc
from collections.abc import Callable

import numpy as np
from common import (
    MIB,
    alternate,
    maxrss_bytes,
    peak_rss_bytes,
    peak_rss_reset,
    report_line,
    rss_bytes,
    seconds,
)

from mitl.annotators.base import Corpus, EmbeddingAnnotator
from mitl.retrieval.both import retrieve_both
from mitl.retrieval.plan import BLOCK_ENTRIES
from mitl.retrieval.topk import TopK

# COCO 5K test split sizes, the ECCV Caption setting; CLIP ViT-B/32 embeds in 512 dimensions.
N_IMAGES = 5_000
N_CAPTIONS = 25_000
DIM = 512
K = 25
SEED = 0
TARGET_RATIO = 1.2
MEMORY_TARGET_MB = 1536
# The data with ties: integer vectors in {-1, 0, 1}, so scores sit on a grid of integers.
TIES_IMAGES, TIES_CAPTIONS, TIES_DIM = 1_000, 5_000, 48


class VectorsAnnotator(EmbeddingAnnotator):
    """Hold given vectors; scoring is EmbeddingAnnotator's plain dot product."""

    kind = "bench-vectors"

    def __init__(self, images: np.ndarray, captions: np.ndarray) -> None:
        super().__init__(name="bench", config={})
        self.image_vectors = images
        self.caption_vectors = captions

    def embed_images(self, corpus: Corpus, rows: np.ndarray) -> np.ndarray:
        raise NotImplementedError("the benchmark passes its vectors in")

    def embed_captions(self, corpus: Corpus, rows: np.ndarray) -> np.ndarray:
        raise NotImplementedError("the benchmark passes its vectors in")


def unit_rows(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    """Return `n` random L2-normalised float32 rows, built in place to keep memory flat."""
    rows = rng.standard_normal((n, dim), dtype=np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    return rows


def make_inputs(seed: int = SEED) -> tuple[np.ndarray, np.ndarray]:
    """Return the seeded (images, captions) embeddings."""
    rng = np.random.default_rng(seed)
    return unit_rows(rng, N_IMAGES, DIM), unit_rows(rng, N_CAPTIONS, DIM)


def run_ours(annotator: VectorsAnnotator) -> tuple[TopK, TopK]:
    """Rank every image and every caption query, the work being timed."""
    n_images, n_captions = len(annotator.image_vectors), len(annotator.caption_vectors)
    return retrieve_both(
        annotator,
        np.arange(n_images),
        np.arange(n_captions),
        K,
        n_images=n_images,
        n_captions=n_captions,
    )


def blocked_product(images: np.ndarray, captions: np.ndarray) -> Callable[[], None]:
    """Return a function computing images @ captions.T as ours does: torch, blocks, one buffer."""
    import torch

    rows = max(1, BLOCK_ENTRIES // len(captions))
    images_t, captions_t = torch.from_numpy(images), torch.from_numpy(captions)
    buffer = torch.empty((min(rows, len(images)), len(captions)), dtype=torch.float32)

    def run() -> None:
        for start in range(0, len(images), rows):
            block = images_t[start : start + rows]
            torch.matmul(block, captions_t.T, out=buffer[: len(block)])

    return run


def brute_force_row(scores: np.ndarray, k: int) -> np.ndarray:
    """Return the top-k columns of one row: score descending, then the lower column (stable).

    Exact and fast: every column scoring at least the k-th best is kept, then sorted fully.
    """
    kth = np.partition(scores, len(scores) - k)[len(scores) - k]
    kept = np.flatnonzero(scores >= kth)
    return kept[np.lexsort((kept, -scores[kept]))][:k]


def check_every_query(
    images: np.ndarray, captions: np.ndarray, i2t: TopK, t2i: TopK, *, exact_ties: bool
) -> dict[str, int]:
    """Check every query of both directions against the brute force; raise if one is wrong.

    The brute force scores with numpy, ours with torch, which may round the last bit
    differently; unless `exact_ties` (integer scores, computed exactly by both), a query
    also passes when the float64 scores of both rankings agree rank by rank (a near-tie
    swapped by rounding). Returns the counts of identical and near-tie rankings.
    """
    identical = near_tie = ties_at_cut = 0
    for queries, targets, top in ((images, captions, i2t), (captions, images, t2i)):
        targets64 = targets.astype(np.float64)
        block = max(1, 2_000_000 // len(targets))
        for start in range(0, len(queries), block):
            scores = queries[start : start + block] @ targets.T
            for offset, row in enumerate(scores):
                query = start + offset
                ours, expected = top.indices[query], brute_force_row(row, K)
                vector = queries[query].astype(np.float64)
                exact_ours = targets64[ours] @ vector
                if not np.allclose(top.scores[query], exact_ours, rtol=0, atol=1e-5):
                    raise AssertionError(f"query {query}: returned scores do not match the pairs")
                ties_at_cut += bool(np.count_nonzero(row == row[expected[-1]]) > 1)
                if np.array_equal(ours, expected):
                    identical += 1
                elif not exact_ties and np.allclose(
                    exact_ours, targets64[expected] @ vector, rtol=0, atol=1e-6
                ):
                    near_tie += 1
                else:
                    raise AssertionError(f"query {query}: ranking differs from the brute force")
    return {"identical": identical, "near_tie": near_tie, "ties_at_cut": ties_at_cut}


def ties_inputs(seed: int = SEED) -> tuple[np.ndarray, np.ndarray]:
    """Integer vectors in {-1, 0, 1}: every score is a small integer, so ties abound."""
    rng = np.random.default_rng(seed + 2)
    return (
        rng.integers(-1, 2, size=(TIES_IMAGES, TIES_DIM)).astype(np.float32),
        rng.integers(-1, 2, size=(TIES_CAPTIONS, TIES_DIM)).astype(np.float32),
    )


def peak_rss_child() -> None:
    """In a subprocess: print the peak RSS (bytes) of one run beyond inputs and imports."""
    import torch  # noqa: F401  # library pages are not retrieval memory; load them first

    images, captions = make_inputs()
    annotator = VectorsAnnotator(images, captions)
    gc.collect()
    before = rss_bytes()
    reset = peak_rss_reset()
    top = run_ours(annotator)
    peak = peak_rss_bytes() if reset else maxrss_bytes()
    print(json.dumps({"extra_bytes": peak - before, "reset_hwm": reset, "k": top[0].k}))


def measure_rss_extra() -> tuple[int, bool]:
    """Return (peak extra bytes, whether the peak mark was reset) from a fresh subprocess."""
    done = subprocess.run(
        [sys.executable, __file__, "--rss-child"], capture_output=True, text=True, check=True
    )
    report = json.loads(done.stdout.strip().splitlines()[-1])
    return int(report["extra_bytes"]), bool(report["reset_hwm"])


def measure_tracemalloc_extra(annotator: VectorsAnnotator) -> int:
    """Return the peak bytes allocated through tracked allocators (numpy) during one run."""
    gc.collect()
    tracemalloc.start()
    try:
        run_ours(annotator)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def main() -> None:
    """Run the benchmark and print the report and the JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="runs per side (best counts)")
    parser.add_argument("--rss-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rss_child:
        peak_rss_child()
        return

    import torch

    print(f"retrieval benchmark: {N_IMAGES:,} images x {N_CAPTIONS:,} captions, dim {DIM}, k {K}")
    print(f"  torch {torch.__version__}, {torch.get_num_threads()} threads, numpy {np.__version__}")
    images, captions = make_inputs()
    annotator = VectorsAnnotator(images, captions)
    input_mb = (images.nbytes + captions.nbytes) / MIB

    # Warm-ups, not timed: import torch, start both libraries' thread pools.
    run_ours(annotator)
    _ = images[:64] @ captions.T
    blocked_run = blocked_product(images, captions)
    times = alternate(
        args.repeats,
        {
            "numpy": lambda: seconds(lambda: images @ captions.T),
            "torch": lambda: seconds(blocked_run),
            "ours": lambda: seconds(lambda: run_ours(annotator)),
        },
    )
    best = {side: min(runs) for side, runs in times.items()}
    floor_side = min(("numpy", "torch"), key=best.__getitem__)
    floor, ours = best[floor_side], best["ours"]
    i2t, t2i = run_ours(annotator)
    checked = check_every_query(images, captions, i2t, t2i, exact_ties=False)
    del i2t, t2i
    tie_images, tie_captions = ties_inputs()
    tie_i2t, tie_t2i = run_ours(VectorsAnnotator(tie_images, tie_captions))
    ties = check_every_query(tie_images, tie_captions, tie_i2t, tie_t2i, exact_ties=True)
    rss_extra, reset = measure_rss_extra()
    traced_extra = measure_tracemalloc_extra(annotator)
    peak_extra_mb = max(rss_extra, traced_extra) / MIB
    ratio = ours / floor

    def runs(side: str) -> str:
        return ", ".join(f"{t:.3f}" for t in times[side])

    matrix_mib = N_IMAGES * N_CAPTIONS * 4 / MIB
    print(f"  inputs {input_mb:.0f} MiB; the score matrix would be {matrix_mib:.0f} MiB")
    print(f"  numpy, images @ captions.T at once: best {best['numpy']:.3f} s of [{runs('numpy')}]")
    print(f"  torch, blocks into one buffer:      best {best['torch']:.3f} s of [{runs('torch')}]")
    print(f"  floor: {floor_side}, {floor:.3f} s")
    print(f"  ours (retrieve_both, i2t + t2i top-{K}): best {ours:.3f} s of [{runs('ours')}]")
    print(f"  ratio ours / floor {ratio:.3f} (target <= {TARGET_RATIO})")
    how = "VmHWM reset before the call" if reset else "lifetime ru_maxrss"
    print(f"  peak extra memory: RSS {rss_extra / MIB:.0f} MiB ({how}, in a subprocess);")
    print(
        f"    tracemalloc {traced_extra / MIB:.0f} MiB (numpy only: torch's buffers are untraced);"
    )
    print(f"    reported: the larger, {peak_extra_mb:.0f} MiB (target <= {MEMORY_TARGET_MB})")
    total = N_IMAGES + N_CAPTIONS
    print(
        f"  correctness: all {total:,} queries, {checked['identical']:,} identical to a stable "
        f"brute force, {checked['near_tie']} differing only in a near-tie order"
    )
    print(
        f"  ties: {TIES_IMAGES:,} x {TIES_CAPTIONS:,} integer vectors, all "
        f"{TIES_IMAGES + TIES_CAPTIONS:,} queries identical to the brute force; "
        f"{ties['ties_at_cut']:,} of them with a tie at the k-th place"
    )
    report_line(
        "retrieval",
        round(ratio, 4),
        TARGET_RATIO,
        "lower",
        floor=floor_side,
        peak_extra_mb=round(peak_extra_mb, 1),
        memory_target_mb=MEMORY_TARGET_MB,
        images=N_IMAGES,
        captions=N_CAPTIONS,
        dim=DIM,
        k=K,
        ours_s=round(ours, 4),
        numpy_s=round(best["numpy"], 4),
        torch_blocked_s=round(best["torch"], 4),
        queries_checked=total,
        near_ties=checked["near_tie"],
        tie_queries_checked=TIES_IMAGES + TIES_CAPTIONS,
        ties_at_cut=ties["ties_at_cut"],
    )


if __name__ == "__main__":
    main()
