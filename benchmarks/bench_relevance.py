"""Relevance matrices of ECCV Caption's queries against COCO 5K, against a per-pair loop.

For each cheap caption–caption proxy (bow, pos, rouge_l, cider_d, minilm), "ours" is what a
user waits for: `proxy_build` over the 25,000 COCO 5K test captions
(`../shared/data/coco5k/captions.tsv`), then `image_to_captions` for ECCV Caption's 1,261
image queries (1,261 × 25,000) and `caption_to_images` for its 1,332 caption queries
(1,332 × 5,000), `mean` aggregation: the relevance of image i to caption c is the mean of
proxy(c, g) over i's own captions g (c counts as 1 against itself).

The baseline is the straightforward per-pair implementation with the same packages: each
caption's items computed once (timed in full), then a plain Python loop scoring one caption
pair at a time, run on a sample of the queries against the whole corpus and extrapolated
linearly to every pair ours scores (n_queries × 25,000 candidates × 5 captions per image
for i2t, n_queries × 25,000 captions for t2i):

- bow / pos: Python sets of `bow_items` / `pos_items` per caption, IoU per pair (pos: the
  mean over nouns and verbs, a part absent from both captions left out);
- rouge_l: pycocoevalcap's `Rouge().calc_score([candidate], [reference])` per pair, on the
  captions' tokens joined by spaces;
- cider_d: pycocoevalcap's `precook` n-gram counts and document frequencies over images,
  each caption's tf-idf vectors, norms and length computed once as its `counts2vec` does,
  then its `sim` formula per pair in Python (clipped min(h, r) * r sums per order over the
  norms, gaussian length penalty with sigma 6, mean of the 4 orders; CIDEr-D / 10);
- minilm: the same MiniLM embeddings of every caption (encoded once: one `embed` call is
  timed, as ours's `proxy_build`, and counted on both sides), then one numpy dot product
  of two vectors per pair, clipped to [0, 1].

Every baseline value of the sample must equal the corresponding entry of ours's matrices
within 1e-4 (checked; the script fails otherwise). WordNet (pos) is loaded once before the
timings; the tagger's word cache is cleared before each side's tagging. Without WordNet
pos is skipped. Ends with one JSON line:

    {"benchmark": "relevance", "ratio": total extrapolated per-pair s / total ours s,
     "target": 20, "better": "higher", "proxies": {name: {"ours_s", "per_pair_s_extrapolated",
     "ratio", ...}}, "queries": {"i2t": n, "t2i": n}, "corpus": {...}}

Usage: python benchmarks/bench_relevance.py [--proxies bow,pos,...] [--sample 20]
       [--sample-slow 4]   (about 6 minutes on 2 cores, most of it MiniLM encoding)
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import sys
import time
import warnings
from collections import defaultdict
from collections.abc import Callable, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
from common import REPO_ROOT, report_line

SHARED = Path(os.environ.get("MITL_SHARED_DIR") or REPO_ROOT.parent / "shared")
CAPTIONS = SHARED / "data/coco5k/captions.tsv"
TARGET = 20
PROXY_NAMES = ("bow", "pos", "rouge_l", "cider_d", "minilm")
SLOW = frozenset({"rouge_l", "cider_d"})  # per-pair loops too slow for the full sample
TOLERANCE = 1e-4
SEED = 0

Relevance = Callable[[int, Sequence[int]], float]  # (candidate, the image's captions) -> mean


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- data


def eccv_queries() -> tuple[list[int], list[int]]:
    """Return ECCV Caption's image and caption query ids (the keys of its positives)."""
    with warnings.catch_warnings():  # the package warns when `ujson` is not installed
        warnings.simplefilter("ignore", UserWarning)
        data = resources.files("eccv_caption").joinpath("data")
    i2t = json.loads(data.joinpath("eccv_image_to_caption.json").read_text())
    t2i = json.loads(data.joinpath("eccv_caption_to_image.json").read_text())
    return sorted(int(i) for i in i2t), sorted(int(c) for c in t2i)


def captions_read() -> tuple[list[int], list[int], list[str]]:
    """Return caption ids, their image ids and texts, in file order."""
    from mitl.formats.captions import parse_captions_tsv  # no Django needed

    rows = parse_captions_tsv(CAPTIONS)
    return [r.caption_id for r in rows], [r.image_id for r in rows], [r.text for r in rows]


# --------------------------------------------------------------------------- ours


def ours_run(
    name: str,
    data: tuple[list[int], list[int], list[str]],
    image_queries: np.ndarray,
    caption_queries: np.ndarray,
) -> tuple[dict[str, float], Any, np.ndarray, np.ndarray]:
    """Build the proxy and both matrices, timed; return times, proxy, i2t, t2i."""
    from mitl.relevance.images import CaptionCorpus, caption_to_images, image_to_captions
    from mitl.relevance.proxies import proxy_build

    gc.collect()
    start = time.perf_counter()
    corpus = CaptionCorpus.of(*data)
    proxy = proxy_build(name, corpus.texts, corpus.caption_images)
    built = time.perf_counter()
    i2t = image_to_captions(proxy, corpus, image_queries, aggregation="mean")
    middle = time.perf_counter()
    t2i = caption_to_images(proxy, corpus, caption_queries, aggregation="mean")
    end = time.perf_counter()
    times = {"build_s": built - start, "i2t_s": middle - built, "t2i_s": end - middle}
    times["ours_s"] = end - start
    return times, proxy, i2t, t2i


# --------------------------------------------------------------------------- per pair


def baseline_prepare(
    name: str, texts: Sequence[str], groups: list[list[int]], embeddings: np.ndarray | None
) -> Relevance:
    """Compute each caption's items once; return the per-pair relevance (mean over refs)."""
    if name in ("bow", "pos"):
        return _set_overlap(name, texts)
    if name == "rouge_l":
        return _rouge(texts)
    if name == "cider_d":
        return _cider(texts, groups)
    if name == "minilm":
        assert embeddings is not None
        return _minilm(embeddings)
    raise ValueError(name)


def _set_overlap(name: str, texts: Sequence[str]) -> Relevance:
    from mitl.relevance.lexical import bow_items, pos_items
    from mitl.relevance.words import CONTENT_POS

    if name == "bow":
        sets = [bow_items(text)[""] for text in texts]

        def bow(c: int, refs: Sequence[int]) -> float:
            a = sets[c]
            la = len(a)
            total = 0.0
            for g in refs:
                if g == c:
                    total += 1.0
                    continue
                b = sets[g]
                inter = len(a & b)
                union = la + len(b) - inter
                if union:
                    total += inter / union
            return total / len(refs)

        return bow

    parts = [tuple(items[pos] for pos in CONTENT_POS) for items in map(pos_items, texts)]

    def pos(c: int, refs: Sequence[int]) -> float:
        a = parts[c]
        total = 0.0
        for g in refs:
            if g == c:
                total += 1.0
                continue
            score = 0.0
            weight = 0
            for x, y in zip(a, parts[g], strict=True):
                inter = len(x & y)
                union = len(x) + len(y) - inter
                if union:
                    score += inter / union
                    weight += 1
            if weight:
                total += score / weight
        return total / len(refs)

    return pos


def _rouge(texts: Sequence[str]) -> Relevance:
    from pycocoevalcap.rouge.rouge import Rouge

    from mitl.relevance.words import tokens

    joined = [" ".join(tokens(text)) for text in texts]
    calc_score = Rouge().calc_score

    def rouge_l(c: int, refs: Sequence[int]) -> float:
        candidate = [joined[c]]
        total = 0.0
        for g in refs:
            total += 1.0 if g == c else calc_score(candidate, [joined[g]])
        return total / len(refs)

    return rouge_l


def _cider(texts: Sequence[str], groups: list[list[int]]) -> Relevance:
    from pycocoevalcap.cider.cider_scorer import precook

    from mitl.relevance.words import tokens

    orders = 4
    counts = [precook(" ".join(tokens(text)), orders) for text in texts]
    document_frequency: dict[tuple[str, ...], float] = defaultdict(float)
    for refs in groups:  # one reference set per image, as pycocoevalcap's compute_doc_freq
        for gram in {gram for g in refs for gram in counts[g]}:
            document_frequency[gram] += 1
    ref_len = math.log(float(len(groups)))
    vectors: list[list[dict[tuple[str, ...], float]]] = []
    norms: list[list[float]] = []
    lengths: list[int] = []
    for cnts in counts:  # pycocoevalcap's counts2vec
        vec: list[dict[tuple[str, ...], float]] = [{} for _ in range(orders)]
        norm = [0.0] * orders
        length = 0
        for gram, term_freq in cnts.items():
            n = len(gram) - 1
            value = float(term_freq) * (ref_len - math.log(max(1.0, document_frequency[gram])))
            vec[n][gram] = value
            norm[n] += value * value
            if n == 1:
                length += term_freq
        vectors.append(vec)
        norms.append([math.sqrt(x) for x in norm])
        lengths.append(length)
    two_sigma_squared = 2 * 6.0**2

    def cider_d(c: int, refs: Sequence[int]) -> float:
        vec_hyp, norm_hyp, length_hyp = vectors[c], norms[c], lengths[c]
        total = 0.0
        for g in refs:
            if g == c:
                total += 1.0
                continue
            vec_ref, norm_ref = vectors[g], norms[g]
            value = 0.0
            for n in range(orders):
                ref_n = vec_ref[n]
                val = 0.0
                for gram, h in vec_hyp[n].items():
                    r = ref_n.get(gram)
                    if r is not None:
                        val += (h if h < r else r) * r
                if norm_hyp[n] != 0 and norm_ref[n] != 0:
                    val /= norm_hyp[n] * norm_ref[n]
                value += val
            delta = float(length_hyp - lengths[g])
            total += value * math.exp(-(delta * delta) / two_sigma_squared) / orders
        return total / len(refs)

    return cider_d


def _minilm(embeddings: np.ndarray) -> Relevance:
    rows = list(embeddings)  # one 1-d float32 vector per caption
    dot = np.dot

    def minilm(c: int, refs: Sequence[int]) -> float:
        a = rows[c]
        total = 0.0
        for g in refs:
            if g == c:
                total += 1.0
                continue
            d = float(dot(a, rows[g]))
            total += 0.0 if d < 0.0 else (1.0 if d > 1.0 else d)
        return total / len(refs)

    return minilm


def baseline_sample(
    relevance: Relevance,
    groups: list[list[int]],
    image_sample: list[int],
    caption_sample: list[int],
) -> tuple[np.ndarray, np.ndarray, float, float]:
    """Score the sampled queries against the whole corpus pair by pair; return the rows
    (i2t: every caption, t2i: every image) and the seconds of each direction."""
    n_captions = sum(map(len, groups))
    start = time.perf_counter()
    i2t = np.array(
        [[relevance(c, groups[q]) for c in range(n_captions)] for q in image_sample],
        dtype=np.float64,
    )
    middle = time.perf_counter()
    t2i = np.array([[relevance(q, refs) for refs in groups] for q in caption_sample])
    end = time.perf_counter()
    return i2t.reshape(len(image_sample), n_captions), t2i, middle - start, end - middle


# --------------------------------------------------------------------------- run


def proxy_measure(
    name: str,
    data: tuple[list[int], list[int], list[str]],
    image_queries: np.ndarray,
    caption_queries: np.ndarray,
    sample: int,
    image_order: list[int],
) -> dict[str, Any]:
    """Time ours, then the per-pair loop on a sample; check the sample against ours."""
    from mitl.relevance.words import tag_word

    rng = np.random.default_rng(SEED)
    image_at = np.sort(rng.choice(len(image_queries), min(sample, len(image_queries)), False))
    caption_at = np.sort(rng.choice(len(caption_queries), min(sample, len(caption_queries)), False))
    tag_word.cache_clear()
    times, proxy, i2t, t2i = ours_run(name, data, image_queries, caption_queries)
    ours_i2t, ours_t2i = i2t[image_at].copy(), t2i[caption_at].copy()
    embeddings = proxy.vectors if name == "minilm" else None
    del proxy, i2t, t2i
    gc.collect()
    say(
        f"  {name}: ours {times['ours_s']:.2f} s (build {times['build_s']:.2f}, "
        f"i2t {times['i2t_s']:.2f}, t2i {times['t2i_s']:.2f})"
    )

    tag_word.cache_clear()
    _, image_ids, texts = data
    start = time.perf_counter()
    groups_of: dict[int, list[int]] = {}
    for index, image in enumerate(image_ids):  # images in order of first appearance
        groups_of.setdefault(image, []).append(index)
    groups = list(groups_of.values())
    relevance = baseline_prepare(name, texts, groups, embeddings)
    prepare_s = time.perf_counter() - start
    if list(groups_of) != image_order:
        raise SystemExit("the per-pair loop's images are not in the order of ours's columns")
    if name == "minilm":  # the same embeddings: their encoding counts on both sides
        prepare_s += times["build_s"]
    image_sample = [int(image_queries[k]) for k in image_at]
    caption_sample = [int(caption_queries[k]) for k in caption_at]
    base_i2t, base_t2i, i2t_s, t2i_s = baseline_sample(
        relevance, groups, image_sample, caption_sample
    )
    n_captions = len(texts)
    sample_pairs_i2t = sum(n_captions * len(groups[q]) for q in image_sample)
    sample_pairs_t2i = len(caption_sample) * n_captions
    pairs_i2t = sum(n_captions * len(groups[int(q)]) for q in image_queries)
    pairs_t2i = len(caption_queries) * n_captions
    extrapolated_i2t = i2t_s / sample_pairs_i2t * pairs_i2t
    extrapolated_t2i = t2i_s / sample_pairs_t2i * pairs_t2i
    per_pair_s = prepare_s + extrapolated_i2t + extrapolated_t2i

    difference = max(
        float(np.abs(base_i2t - ours_i2t).max(initial=0.0)),
        float(np.abs(base_t2i - ours_t2i).max(initial=0.0)),
    )
    if not difference < TOLERANCE:
        raise SystemExit(
            f"{name}: the per-pair values differ from ours by {difference:.3g} "
            f"(tolerance {TOLERANCE}) on the sample"
        )
    per_pair_us = (i2t_s + t2i_s) / (sample_pairs_i2t + sample_pairs_t2i) * 1e6
    say(
        f"  {name}: per pair: prepare {prepare_s:.2f} s, sample {len(image_sample)} + "
        f"{len(caption_sample)} queries ({sample_pairs_i2t + sample_pairs_t2i:,} pairs) "
        f"{i2t_s + t2i_s:.2f} s = {per_pair_us:.2f} µs a pair, extrapolated "
        f"{per_pair_s:.1f} s; max |difference| {difference:.2g}"
    )
    return {
        **{key: round(value, 3) for key, value in times.items()},
        "per_pair_s_extrapolated": round(per_pair_s, 2),
        "ratio": round(per_pair_s / times["ours_s"], 2),
        "per_pair_prepare_s": round(prepare_s, 3),
        "per_pair_us": round(per_pair_us, 3),
        "sample": {"i2t": len(image_sample), "t2i": len(caption_sample)},
        "pairs": {"i2t": pairs_i2t, "t2i": pairs_t2i},
        "max_abs_difference": float(f"{difference:.3g}"),
    }


def table_print(results: dict[str, dict[str, Any]], skipped: dict[str, str]) -> None:
    say("")
    say(
        f"{'proxy':<9}{'ours s':>9}{'build':>8}{'i2t':>8}{'t2i':>8}"
        f"{'per-pair s':>13}{'µs/pair':>9}{'ratio':>9}{'max|diff|':>11}"
    )
    for name, r in results.items():
        say(
            f"{name:<9}{r['ours_s']:>9.2f}{r['build_s']:>8.2f}{r['i2t_s']:>8.2f}"
            f"{r['t2i_s']:>8.2f}{r['per_pair_s_extrapolated']:>13.1f}{r['per_pair_us']:>9.2f}"
            f"{r['ratio']:>9.1f}{r['max_abs_difference']:>11.2g}"
        )
    for name, why in skipped.items():
        say(f"{name:<9}skipped: {why}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--proxies", default=",".join(PROXY_NAMES), help="comma-separated, default: all five"
    )
    parser.add_argument(
        "--sample", type=int, default=20, help="queries per direction for the per-pair loop"
    )
    parser.add_argument(
        "--sample-slow", type=int, default=4, help="the same for rouge_l and cider_d"
    )
    args = parser.parse_args()
    names = [n.strip() for n in args.proxies.split(",") if n.strip()]
    unknown = [n for n in names if n not in PROXY_NAMES]
    if unknown:
        raise SystemExit(f"unknown proxies {unknown}; choose from {', '.join(PROXY_NAMES)}")
    if not CAPTIONS.is_file():
        raise SystemExit(
            f"{CAPTIONS} is not there: this benchmark needs the COCO 5K captions in "
            "../shared beside the checkout (or MITL_SHARED_DIR)"
        )
    script_start = time.perf_counter()
    from mitl.relevance.images import CaptionCorpus
    from mitl.relevance.wordnet import wordnet, wordnet_available, wordnet_dir

    data = captions_read()
    corpus = CaptionCorpus.of(*data)  # for the query indexes only
    image_ids, caption_ids = eccv_queries()
    image_index = {int(i): k for k, i in enumerate(corpus.image_ids)}
    caption_index = {int(c): k for k, c in enumerate(corpus.caption_ids)}
    missing = [i for i in image_ids if i not in image_index] + [
        c for c in caption_ids if c not in caption_index
    ]
    if missing:
        raise SystemExit(f"{len(missing)} ECCV Caption query ids are not in {CAPTIONS}")
    image_queries = np.array([image_index[i] for i in image_ids], dtype=np.int64)
    caption_queries = np.array([caption_index[c] for c in caption_ids], dtype=np.int64)
    say(
        f"relevance benchmark: {len(corpus.caption_ids):,} captions of "
        f"{len(corpus.image_ids):,} images; ECCV Caption queries: {len(image_queries):,} "
        f"images (i2t), {len(caption_queries):,} captions (t2i); mean aggregation"
    )
    skipped: dict[str, str] = {}
    if "pos" in names:
        if wordnet_available():
            start = time.perf_counter()
            wordnet()
            say(f"  WordNet loaded (not timed): {time.perf_counter() - start:.1f} s")
        else:
            skipped["pos"] = f"WordNet is not installed in {wordnet_dir()}"
            say(f"  pos skipped: {skipped['pos']} (make wordnet)")
    image_order = [int(i) for i in corpus.image_ids]  # the columns of ours's t2i
    del corpus
    results: dict[str, dict[str, Any]] = {}
    for name in names:
        if name in skipped:
            continue
        sample = args.sample_slow if name in SLOW else args.sample
        results[name] = proxy_measure(
            name, data, image_queries, caption_queries, sample, image_order
        )
        gc.collect()
    if not results:
        raise SystemExit("no proxy measured")
    table_print(results, skipped)
    ours_total = sum(r["ours_s"] for r in results.values())
    per_pair_total = sum(r["per_pair_s_extrapolated"] for r in results.values())
    ratio = per_pair_total / ours_total
    wall = time.perf_counter() - script_start
    say(
        f"{'total':<9}{ours_total:>9.2f}{'':>24}{per_pair_total:>13.1f}{'':>9}{ratio:>9.1f}"
        f"  (target >= {TARGET:g}); script {wall:.0f} s"
    )
    report_line(
        "relevance",
        round(ratio, 2),
        TARGET,
        "higher",
        proxies={  # the three headline fields first
            name: {key: r[key] for key in ("ours_s", "per_pair_s_extrapolated", "ratio")} | r
            for name, r in results.items()
        },
        skipped=skipped,
        queries={"i2t": len(image_queries), "t2i": len(caption_queries)},
        corpus={"captions": len(data[0]), "images": len(set(data[1]))},
        ours_s=round(ours_total, 2),
        per_pair_s_extrapolated=round(per_pair_total, 1),
        script_s=round(wall, 1),
    )


if __name__ == "__main__":
    main()
