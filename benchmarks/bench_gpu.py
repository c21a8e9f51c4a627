"""Benchmark: the CUDA paths, checked and timed (retrieval engine, open_clip annotator).

Run from the repository root on a machine with an NVIDIA GPU::

    python benchmarks/bench_gpu.py [--scales 1 10] [--device cuda]

It needs only torch, numpy, Pillow, open_clip_torch and this repository's pure `mitl`
package (no Django, no database, no download), so it runs on a GPU machine whose Python
already holds torch: copy the repository, `pip install open_clip_torch==3.3.0` if missing.

1. Retrieval. `mitl.retrieval.both.retrieve_both` on `--device` ranks the top 25 captions of
   every image and the top 25 images of every caption from seeded L2-normalised float32
   embeddings (dimension 512) at `--scales` times the COCO 5K size (5,000 × 25,000; 10 gives
   50,000 × 250,000). Checked, not timed: 256 sampled queries per direction against a
   float64 brute force, where only near-ties (scores within 1e-5) may swap. Baseline, timed
   alike: the plain way on the same device, blocks of the product with `torch.matmul` and
   `torch.topk` along each direction (two passes). ratio = ours / baseline (lower is
   better); both include the copy of the embeddings to the device and of the results back.
2. open_clip. An untrained ViT-B-32 saved to a local checkpoint, loaded by
   `mitl.annotators.open_clip.OpenClipAnnotator` on CUDA in fp32 and in bf16: images per
   second (files → vectors: decoding and preprocessing on the CPU included) and captions per
   second; the model forward alone on ready pixels too. Checked: CUDA fp32 vectors equal the
   CPU's (cosine ≥ 0.999 on 16 images and 16 captions); bf16 vectors within cosine 0.99.

Without CUDA the script says so in its JSON line and exits 0; `--device cpu --small` runs
the same code small, on the CPU, as a smoke test. The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from bench_retrieval import VectorsAnnotator, unit_rows  # the same held vectors
from common import report_line

from mitl.annotators.base import Corpus
from mitl.retrieval.both import retrieve_both
from mitl.retrieval.topk import TopK

N_IMAGES, N_CAPTIONS, DIM, K, SEED = 5_000, 25_000, 512, 25, 0
SAMPLED = 256
NEAR_TIE = 1e-5
TARGET_RATIO = 1.0  # ours no slower than the plain matmul + topk on the same device
BLOCK_ENTRIES = 1 << 28  # the baseline's scores per block (1 GiB of float32)


def synchronized(device: str, work: Callable[[], Any]) -> tuple[float, Any]:
    """Run `work` and return (seconds, result), waiting for the device to finish."""
    import torch

    if device == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    result = work()
    if device == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - start, result


def ours(images: np.ndarray, captions: np.ndarray, device: str) -> tuple[TopK, TopK]:
    annotator = VectorsAnnotator(images, captions)
    return retrieve_both(
        annotator,
        np.arange(len(images)),
        np.arange(len(captions)),
        K,
        n_images=len(images),
        n_captions=len(captions),
        device=device,
    )


def plain(images: np.ndarray, captions: np.ndarray, device: str) -> tuple[np.ndarray, ...]:
    """The plain way: matmul blocks and torch.topk, once per direction."""
    import torch

    images_t = torch.from_numpy(images).to(device)
    captions_t = torch.from_numpy(captions).to(device)

    def direction(queries: Any, targets: Any) -> np.ndarray:
        rows = max(1, BLOCK_ENTRIES // len(targets))
        parts = []
        for start in range(0, len(queries), rows):
            scores = queries[start : start + rows] @ targets.T
            parts.append(torch.topk(scores, K, dim=1).indices)
        return torch.cat(parts).cpu().numpy()

    return direction(images_t, captions_t), direction(captions_t, images_t)


def wrong_rows(got: np.ndarray, queries: np.ndarray, targets: np.ndarray, rows: np.ndarray) -> int:
    """Count sampled queries whose ranking differs from float64's beyond near-ties."""
    wrong = 0
    for row in rows:
        exact = targets.astype(np.float64) @ queries[row].astype(np.float64)
        order = np.lexsort((np.arange(len(exact)), -exact))[:K]
        mine = got[row]
        if np.array_equal(order, mine):
            continue
        # Equal as multisets of scores within a near-tie: only ties swapped places.
        if not np.allclose(np.sort(exact[order]), np.sort(exact[mine]), atol=NEAR_TIE):
            wrong += 1
    return wrong


def retrieval_at(scale: int, device: str, repeats: int) -> dict[str, Any]:
    rng = np.random.default_rng(SEED + scale)
    images = unit_rows(rng, N_IMAGES * scale, DIM)
    captions = unit_rows(rng, N_CAPTIONS * scale, DIM)
    ours(images[:100], captions[:500], device)  # warm-up: kernels, allocator
    plain(images[:100], captions[:500], device)
    best = {"ours": float("inf"), "plain": float("inf")}
    for _ in range(repeats):  # alternating, the best of each counts
        seconds, (i2t, t2i) = synchronized(device, lambda: ours(images, captions, device))
        best["ours"] = min(best["ours"], seconds)
        seconds, _ = synchronized(device, lambda: plain(images, captions, device))
        best["plain"] = min(best["plain"], seconds)
    sample = np.random.default_rng(SEED).choice
    wrong = wrong_rows(i2t.indices, images, captions, sample(len(images), SAMPLED))
    wrong += wrong_rows(t2i.indices, captions, images, sample(len(captions), SAMPLED))
    if wrong:
        raise SystemExit(f"retrieval at {scale}x: {wrong} sampled queries ranked wrongly")
    return {
        "scale": scale,
        "images": len(images),
        "captions": len(captions),
        "ours_s": round(best["ours"], 4),
        "plain_s": round(best["plain"], 4),
        "ratio": round(best["ours"] / best["plain"], 3),
    }


def open_clip_figures(device: str, small: bool) -> dict[str, Any]:
    """Throughput of the open_clip annotator (fp32, bf16) and its vectors against the CPU's."""
    import open_clip
    import torch
    from PIL import Image

    n = 32 if small else 1024
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        model = open_clip.create_model("ViT-B-32", pretrained=None)
        torch.save(model.state_dict(), folder / "vit-b-32.pt")
        rng = np.random.default_rng(SEED)
        paths = []
        for index in range(n):
            pixels = rng.integers(0, 256, (256, 256, 3), dtype=np.uint8)
            path = folder / f"{index}.png"
            Image.fromarray(pixels).save(path)
            paths.append(str(path))
        corpus = Corpus(
            image_ids=np.arange(n),
            caption_ids=np.arange(n),
            caption_texts=tuple(f"a photo of thing number {i} on a table" for i in range(n)),
            caption_image=np.arange(n),
            image_paths=tuple(paths),
        )
        return _clip_runs(folder / "vit-b-32.pt", corpus, device)


def _annotator(checkpoint: Path, device: str, precision: str) -> Any:
    from mitl.annotators.open_clip import OpenClipAnnotator

    config = {"model": "ViT-B-32", "checkpoint": str(checkpoint), "batch_size": 256}
    return OpenClipAnnotator(
        name=f"vit-{device}-{precision}",
        config={**config, "device": device, "precision": precision},
    )


def _clip_runs(checkpoint: Path, corpus: Corpus, device: str) -> dict[str, Any]:
    probe = np.arange(16)
    cpu = _annotator(checkpoint, "cpu", "fp32")
    reference = (cpu.embed_images(corpus, probe), cpu.embed_captions(corpus, probe))
    return {
        precision: _clip_one(_annotator(checkpoint, device, precision), corpus, reference)
        for precision in ("fp32", "bf16")
    }


def _clip_one(annotator: Any, corpus: Corpus, reference: tuple[np.ndarray, ...]) -> dict:
    """Time one annotator (files → vectors, and the forward alone) and check its vectors."""
    import torch
    from open_clip import get_input_dtype

    rows, device = np.arange(corpus.n_images), annotator.device_option
    annotator.embed_images(corpus, rows[:16])  # warm-up and load
    seconds_images, vectors = synchronized(device, lambda: annotator.embed_images(corpus, rows))
    seconds_texts, texts = synchronized(device, lambda: annotator.embed_captions(corpus, rows))
    model, on = annotator._ready()
    pixels = torch.randn(256, 3, 224, 224, device=on).to(get_input_dtype(annotator.precision))
    with torch.inference_mode():
        forward, _ = synchronized(device, lambda: model.encode_image(pixels))
    least = 0.999 if annotator.precision == "fp32" else 0.99
    cosines = [
        float(np.min(np.sum(mine[: len(ref)] * ref, axis=1)))
        for mine, ref in ((vectors, reference[0]), (texts, reference[1]))
    ]
    if min(cosines) < least:
        raise SystemExit(f"open_clip {annotator.name}: cosine {min(cosines)} < {least}")
    return {
        "images_per_s": round(len(rows) / seconds_images, 1),
        "captions_per_s": round(len(rows) / seconds_texts, 1),
        "forward_images_per_s": round(len(pixels) / forward, 1),
        "least_cosine_to_cpu": round(min(cosines), 5),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scales", type=int, nargs="+", default=[1, 10])
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--small", action="store_true", help="a smoke test: tiny sizes")
    args = parser.parse_args(argv)
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        why = "no CUDA device here: run it on a machine with an NVIDIA GPU"
        report_line("gpu", ratio=None, target=TARGET_RATIO, better="lower", skipped=why)
        return 0
    if args.small:
        global N_IMAGES, N_CAPTIONS
        N_IMAGES, N_CAPTIONS = 200, 1_000
    device_name = torch.cuda.get_device_name() if args.device == "cuda" else "cpu"
    retrieval = [retrieval_at(scale, args.device, args.repeats) for scale in args.scales]
    for row in retrieval:
        print(f"retrieval {row['scale']}x: ours {row['ours_s']} s, plain {row['plain_s']} s")
    clip = open_clip_figures(args.device, args.small)
    for precision, row in clip.items():
        print(f"open_clip {precision}: {row}")
    report_line(
        "gpu",
        ratio=max(row["ratio"] for row in retrieval),
        target=TARGET_RATIO,
        better="lower",
        device=device_name,
        torch=torch.__version__,
        retrieval=retrieval,
        open_clip=clip,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
