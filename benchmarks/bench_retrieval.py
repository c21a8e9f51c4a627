"""Benchmark exact top-k retrieval in both directions against one matrix product.

Run from the repository root::

    .venv/bin/python benchmarks/bench_retrieval.py

What it measures: `mitl.retrieval.both.retrieve_both` ("ours") ranking the top 25 captions of
all 5,000 images and the top 25 images of all 25,000 captions from seeded, L2-normalised float32
embeddings of dimension 512 held by a minimal `EmbeddingAnnotator`. The baseline is the floor
of any exact method: one numpy product `images @ captions.T` of the same shapes, which only
computes the scores. For reference (not in the ratio) the same product is also timed the way
ours computes it, in torch, block by block into one reused buffer. The sides run alternately,
3 times each after an untimed warm-up, and the best time of each counts. The peak extra memory
of ours is measured in a fresh subprocess (peak RSS beyond the inputs, which sees torch's
allocations too) and with `tracemalloc` (numpy's allocations only). A sample of queries is
checked against a brute-force sort. No Django, no database. The last line is one JSON object.
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
TARGET_RATIO = 1.5
MEMORY_TARGET_MB = 1536
SAMPLE_QUERIES = 100


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
    return retrieve_both(
        annotator,
        np.arange(N_IMAGES),
        np.arange(N_CAPTIONS),
        K,
        n_images=N_IMAGES,
        n_captions=N_CAPTIONS,
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


def brute_force(scores: np.ndarray, k: int) -> np.ndarray:
    """Return the top-k columns of each row by a full sort: score descending, then column."""
    columns = np.arange(scores.shape[1])
    return np.stack([np.lexsort((columns, -row))[:k] for row in scores])


def check_sample(
    images: np.ndarray, captions: np.ndarray, i2t: TopK, t2i: TopK, seed: int
) -> dict[str, int]:
    """Check sampled queries of both directions against a brute-force sort; raise if wrong.

    The reference scores come from numpy's product, ours from torch's, which may round the
    last bit differently; so a query passes when its ranking is identical, or when the exact
    (float64) scores of both rankings agree rank by rank within rounding (a near-tie order).
    """
    rng = np.random.default_rng(seed + 1)
    identical = near_tie = 0
    for queries, targets, top in ((images, captions, i2t), (captions, images, t2i)):
        sample = rng.choice(len(queries), size=SAMPLE_QUERIES, replace=False)
        expected = brute_force(queries[sample] @ targets.T, K)
        for row, query in enumerate(sample):
            ours = top.indices[query]
            exact = queries[query].astype(np.float64) @ targets.T.astype(np.float64)
            if not np.allclose(top.scores[query], exact[ours], rtol=0, atol=1e-5):
                raise AssertionError(f"query {query}: returned scores do not match the pairs")
            if np.array_equal(ours, expected[row]):
                identical += 1
            elif np.allclose(exact[ours], exact[expected[row]], rtol=0, atol=1e-6):
                near_tie += 1
            else:
                raise AssertionError(f"query {query}: ranking differs from the brute-force sort")
    return {"checked": 2 * SAMPLE_QUERIES, "identical": identical, "near_tie": near_tie}


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
            "baseline": lambda: seconds(lambda: images @ captions.T),
            "blocked": lambda: seconds(blocked_run),
            "ours": lambda: seconds(lambda: run_ours(annotator)),
        },
    )
    baseline, blocked, ours = (min(times[side]) for side in ("baseline", "blocked", "ours"))
    i2t, t2i = run_ours(annotator)
    sample = check_sample(images, captions, i2t, t2i, SEED)
    del i2t, t2i
    rss_extra, reset = measure_rss_extra()
    traced_extra = measure_tracemalloc_extra(annotator)
    peak_extra_mb = max(rss_extra, traced_extra) / MIB
    ratio = ours / baseline

    def runs(side: str) -> str:
        return ", ".join(f"{t:.3f}" for t in times[side])

    matrix_mib = N_IMAGES * N_CAPTIONS * 4 / MIB
    print(f"  inputs {input_mb:.0f} MiB; the score matrix would be {matrix_mib:.0f} MiB")
    print(f"  baseline (numpy images @ captions.T): best {baseline:.3f} s of [{runs('baseline')}]")
    print(f"  reference (torch, blocks, one buffer): best {blocked:.3f} s of [{runs('blocked')}]")
    print(f"  ours (retrieve_both, i2t + t2i top-{K}): best {ours:.3f} s of [{runs('ours')}]")
    print(f"  ratio {ratio:.3f} (target <= {TARGET_RATIO}); ours / reference {ours / blocked:.3f}")
    how = "VmHWM reset before the call" if reset else "lifetime ru_maxrss"
    print(f"  peak extra memory: RSS {rss_extra / MIB:.0f} MiB ({how}, in a subprocess);")
    print(
        f"    tracemalloc {traced_extra / MIB:.0f} MiB (numpy only: torch's buffers are untraced);"
    )
    print(f"    reported: the larger, {peak_extra_mb:.0f} MiB (target <= {MEMORY_TARGET_MB})")
    print(
        f"  correctness: {sample['checked']} sampled queries, {sample['identical']} identical to "
        f"a brute-force sort, {sample['near_tie']} differing only in a near-tie order"
    )
    report_line(
        "retrieval",
        round(ratio, 4),
        TARGET_RATIO,
        "lower",
        peak_extra_mb=round(peak_extra_mb, 1),
        memory_target_mb=MEMORY_TARGET_MB,
        images=N_IMAGES,
        captions=N_CAPTIONS,
        dim=DIM,
        k=K,
        ours_s=round(ours, 4),
        baseline_s=round(baseline, 4),
        blocked_matmul_s=round(blocked, 4),
    )


if __name__ == "__main__":
    main()
