"""Caption–caption relevance proxies: hand-worked set overlaps, CIDEr-D, ROUGE-L and METEOR
against pycocoevalcap (and rouge-score), MiniLM sanity, and image–caption aggregation."""

from __future__ import annotations

import shutil
from collections.abc import Sequence

import numpy as np
import pytest

from mitl.relevance import wordnet as wordnet_module
from mitl.relevance.cider import CiderD
from mitl.relevance.images import (
    CaptionCorpus,
    caption_to_images,
    image_to_captions,
    pair_relevance,
)
from mitl.relevance.lexical import SetOverlap, bow_items, pos_items, synset_items
from mitl.relevance.proxies import PROXIES, UnknownProxy, proxy_build, proxy_unavailable
from mitl.relevance.rouge import BETA, RougeL
from mitl.relevance.words import content_words, tokens

needs_wordnet = pytest.mark.skipif(
    not wordnet_module.wordnet_available(), reason="WordNet files are not installed"
)
needs_java = pytest.mark.skipif(shutil.which("java") is None, reason="METEOR needs java")


def _minilm_available() -> bool:
    from mitl.annotators.text_embedding import default_model_path

    return default_model_path() is not None


needs_minilm = pytest.mark.skipif(
    not _minilm_available(), reason="the all-MiniLM-L6-v2 model package is not installed"
)

RIDER = "a man riding a horse on the beach"
RIDER_PARAPHRASE = "a person rides a horse at the shore"

REAL_CAPTIONS = [
    "A man riding a wave on top of a surfboard.",
    "Two dogs are playing with a frisbee in the park.",
    "A plate of food with broccoli, rice and chicken.",
    "A red double decker bus driving down a city street.",
    "A cat sleeping on a couch next to a remote control.",
    "A group of people standing around a kitchen preparing food.",
]


def _score(items_of, left: str, right: str) -> float:
    """Return the set-overlap proxy of one caption against another."""
    overlap = SetOverlap([left, right], items_of)
    value = overlap.matrix(np.array([0]), np.array([1]))[0, 0]
    # pairs() is the same computation pair by pair
    assert overlap.pairs(np.array([0]), np.array([1]))[0] == pytest.approx(value)
    return float(value)


# --- set overlaps (Wray et al.) -----------------------------------------------------------


def test_bow_is_the_iou_of_the_non_stop_words() -> None:
    # {man, riding, horse, beach} vs {person, rides, horse, shore}: 1 shared of 7 words
    assert bow_items(RIDER) == {"": {"man", "riding", "horse", "beach"}}
    assert _score(bow_items, RIDER, RIDER_PARAPHRASE) == pytest.approx(1 / 7)
    assert _score(bow_items, "a cat on a couch", "a cat on a sofa") == pytest.approx(1 / 3)


@needs_wordnet
def test_pos_averages_the_noun_and_verb_iou() -> None:
    # the tags the hand computation below relies on
    assert content_words(RIDER) == [("man", "n"), ("ride", "v"), ("horse", "n"), ("beach", "n")]
    assert content_words(RIDER_PARAPHRASE) == [
        ("person", "n"),
        ("ride", "v"),
        ("horse", "n"),
        ("shore", "n"),
    ]
    # nouns {man, horse, beach} vs {person, horse, shore}: 1/5; verbs {ride} vs {ride}: 1
    assert _score(pos_items, RIDER, RIDER_PARAPHRASE) == pytest.approx((1 / 5 + 1) / 2)


@needs_wordnet
def test_pos_leaves_out_a_part_of_speech_absent_from_both_captions() -> None:
    # no verbs in either: the noun IoU {cat, couch} vs {cat, sofa} = 1/3 alone
    assert _score(pos_items, "a cat on a couch", "a cat on a sofa") == pytest.approx(1 / 3)
    # a verb in only one caption counts as an IoU of 0: (1/3 + 0) / 2
    assert _score(pos_items, "a cat on a couch", "a dog sleeping on a couch") == pytest.approx(
        1 / 6
    )


@needs_wordnet
def test_synonyms_match_under_synset_but_not_under_pos() -> None:
    assert _score(pos_items, "a cat on a couch", "a cat on a sofa") == pytest.approx(1 / 3)
    assert _score(synset_items, "a cat on a couch", "a cat on a sofa") == pytest.approx(1.0)
    # nouns {dog, sofa} vs {cat, sofa} as synsets: 1/3; verbs sleep vs lie: 0
    left, right = "a dog sleeping on a couch", "a cat lying on a sofa"
    assert _score(pos_items, left, right) == pytest.approx(0.0)
    assert _score(synset_items, left, right) == pytest.approx(1 / 6)
    # man and person, beach and shore are different first senses
    assert _score(synset_items, RIDER, RIDER_PARAPHRASE) == pytest.approx((1 / 5 + 1) / 2)


@pytest.mark.parametrize(
    "items_of",
    [
        bow_items,
        pytest.param(pos_items, marks=needs_wordnet),
        pytest.param(synset_items, marks=needs_wordnet),
    ],
)
def test_set_overlap_scores_one_on_itself_and_zero_without_counted_words(items_of) -> None:
    assert _score(items_of, RIDER, RIDER) == pytest.approx(1.0)
    # only stop words (and, for pos/synset, no nouns or verbs): nothing to compare
    assert _score(items_of, "the of and a", "a photo of it") == 0.0


# --- CIDEr-D against pycocoevalcap ---------------------------------------------------------

CIDER_IMAGES: list[list[str]] = [
    [
        "a man riding a horse on the beach",
        "a person rides a horse along the shore",
        "a man and a horse and a dog on a sandy beach",
    ],
    [
        "a plate of food with rice and broccoli",
        "a white plate topped with rice broccoli and chicken",
        "food on a plate on a table",
        "a dinner plate with a plate of rice",
    ],
    [
        "a red bus driving down a city street",
        "a double decker bus on a street",
    ],
    [
        "a cat sleeping on a couch",
        "a cat lying on a sofa next to a remote",
        "a small cat curled up on a couch",
    ],
    [
        "two dogs playing with a frisbee in a park",
        "a dog catches a frisbee in the grass",
        "dogs running on a field with a frisbee",
    ],
]


def _cider_case() -> tuple[list[str], list[int], list[int]]:
    """Return (texts, image of each text, candidate text of each image).

    pycocoevalcap counts document frequencies over the references only, so each candidate
    is either another image's reference or a contiguous span of one of its own image's
    references: indexing it then adds no n-gram to any image.
    """
    texts = [caption for refs in CIDER_IMAGES for caption in refs]
    groups = [image for image, refs in enumerate(CIDER_IMAGES) for _ in refs]
    first = np.cumsum([0, *map(len, CIDER_IMAGES)])
    spans = {
        0: "a man and a horse",  # inside image 0's third reference, repeated "a"
        1: "a plate of rice",  # repeated "plate" in the reference: clipping
        3: "cat curled up on a couch",
    }
    candidates: list[int] = []
    for image in range(len(CIDER_IMAGES)):
        if image in spans:
            texts.append(spans[image])
            groups.append(image)
            candidates.append(len(texts) - 1)
        else:
            candidates.append(int(first[(image + 1) % len(CIDER_IMAGES)]))  # another image's
    return texts, groups, candidates


def test_cider_d_matches_pycocoevalcap() -> None:
    from pycocoevalcap.cider.cider import Cider

    texts, groups, candidates = _cider_case()
    cider = CiderD(texts, groups)
    gts: dict[int, list[str]] = {}
    res: dict[int, list[str]] = {}
    ours: list[float] = []
    for image, refs in enumerate(CIDER_IMAGES):
        ref_index = np.array([texts.index(r) for r in refs])
        gts[image] = [" ".join(tokens(r)) for r in refs]
        res[image] = [" ".join(tokens(texts[candidates[image]]))]
        ours.append(10 * float(cider.matrix(np.array([candidates[image]]), ref_index).mean()))
    mean, per_image = Cider().compute_score(gts, res)
    assert np.asarray(per_image) == pytest.approx(np.array(ours), abs=1e-6)
    assert mean == pytest.approx(np.mean(ours), abs=1e-6)
    assert max(ours) > 1.0  # the comparison is not between zeros


def test_cider_d_pairs_is_the_matrix_diagonal() -> None:
    texts, groups, _ = _cider_case()
    cider = CiderD(texts, groups)
    rng = np.random.default_rng(3)
    left = rng.integers(0, len(texts), size=12)
    right = rng.integers(0, len(texts), size=12)
    expected = np.diag(cider.matrix(left, right))
    assert cider.pairs(left, right) == pytest.approx(expected, abs=1e-6)


# --- ROUGE-L -------------------------------------------------------------------------------


def _random_captions(
    rng: np.random.Generator, n: int, vocabulary: Sequence[str], longest: int = 12
) -> list[str]:
    """Return n captions of 1..longest words drawn from a small vocabulary (many repeats)."""
    lengths = rng.integers(1, longest + 1, size=n)
    return [" ".join(rng.choice(vocabulary, size=int(k))) for k in lengths]


def _lcs(a: Sequence[str], b: Sequence[str]) -> int:
    """Return the longest common subsequence length by the textbook DP."""
    table = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i, x in enumerate(a, 1):
        for j, y in enumerate(b, 1):
            table[i][j] = (
                table[i - 1][j - 1] + 1 if x == y else max(table[i - 1][j], table[i][j - 1])
            )
    return table[-1][-1]


def _rouge_from_lcs(lcs: int, cand_len: int, ref_len: int) -> float:
    """Return ROUGE-L F (beta 1.2) from the LCS: (1 + b²) L / (|c| + b² |r|)."""
    if lcs == 0:
        return 0.0
    return (1 + BETA**2) * lcs / (cand_len + BETA**2 * ref_len)


def test_rouge_l_matches_pycocoevalcap() -> None:
    from pycocoevalcap.rouge.rouge import Rouge

    rng = np.random.default_rng(11)
    texts = _random_captions(rng, 30, ["a", "man", "dog", "on", "the", "beach", "red"])
    texts += ["dog", "man", "a man a man a man", "beach dog"]  # one-token and repeated words
    rouge = RougeL(texts)
    reference = Rouge()
    rows = np.arange(len(texts))
    matrix = rouge.matrix(rows, rows)
    left = rng.integers(0, len(texts), size=200)
    right = rng.integers(0, len(texts), size=200)
    pairs = rouge.pairs(left, right)
    for k, (c, r) in enumerate(zip(left, right, strict=True)):
        expected = reference.calc_score([" ".join(tokens(texts[c]))], [" ".join(tokens(texts[r]))])
        assert matrix[c, r] == pytest.approx(expected, abs=1e-6)
        assert pairs[k] == pytest.approx(expected, abs=1e-6)


def test_rouge_l_of_an_empty_caption_is_zero() -> None:
    rouge = RougeL(["a man on a horse", "", "!!!"])
    everything = np.arange(3)
    matrix = rouge.matrix(everything, everything)
    assert matrix[0, 0] == pytest.approx(1.0)
    # the empty (or punctuation-only) caption scores 0 both ways, even against itself
    assert np.all(matrix[1:, :] == 0) and np.all(matrix[:, 1:] == 0)
    assert np.all(rouge.pairs(np.array([0, 1, 1]), np.array([1, 0, 1])) == 0)


def test_rouge_l_precision_and_recall_match_rouge_score() -> None:
    # rouge-score reports F with beta = 1, pycocoevalcap (and RougeL) beta = 1.2, so compare
    # the LCS-based precision and recall, recovered from RougeL's F:
    # F = (1 + b²) L / (|c| + b² |r|)  =>  L = F (|c| + b² |r|) / (1 + b²)
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False)
    rng = np.random.default_rng(5)
    texts = _random_captions(rng, 40, ["a", "cat", "sits", "on", "mat", "the"])
    rouge = RougeL(texts)
    left = rng.integers(0, len(texts), size=60)
    right = rng.integers(0, len(texts), size=60)
    for f, c, r in zip(rouge.pairs(left, right), left, right, strict=True):
        cand_len, ref_len = len(tokens(texts[c])), len(tokens(texts[r]))
        lcs = round(float(f) * (cand_len + BETA**2 * ref_len) / (1 + BETA**2))
        expected = scorer.score(texts[r], texts[c])["rougeL"]  # score(target, prediction)
        assert lcs / cand_len == pytest.approx(expected.precision)
        assert lcs / ref_len == pytest.approx(expected.recall)


def test_rouge_l_bit_parallel_lcs_matches_the_dp() -> None:
    # a tiny vocabulary makes repeated tokens (the hard case for bit-parallel LCS) common
    rng = np.random.default_rng(0)
    texts = _random_captions(rng, 200, ["a", "b", "c"], longest=40)
    words = [tokens(t) for t in texts]
    rouge = RougeL(texts)
    rows = np.arange(len(texts))
    matrix = rouge.matrix(rows, rows)
    cands = rng.permutation(len(texts))
    pairs = rouge.pairs(cands, rows)

    def expected(c: int, r: int) -> float:
        return _rouge_from_lcs(_lcs(words[c], words[r]), len(words[c]), len(words[r]))

    for c in range(len(texts)):
        for r in rng.choice(len(texts), size=10, replace=False):
            assert matrix[c, r] == pytest.approx(expected(c, int(r)), abs=1e-6)
    for k, (c, r) in enumerate(zip(cands, rows, strict=True)):
        assert pairs[k] == pytest.approx(expected(int(c), int(r)), abs=1e-6)


# --- METEOR and MiniLM ---------------------------------------------------------------------


@needs_java
def test_meteor_matches_pycocoevalcap(monkeypatch: pytest.MonkeyPatch) -> None:
    import pycocoevalcap.meteor.meteor as jar_module

    from mitl.relevance.meteor import Meteor

    # One JVM takes ~13 s to load METEOR's tables: Meteor.pairs is handed the jar the
    # reference scores come from, instead of starting a second one.
    jar = jar_module.Meteor()
    monkeypatch.setattr(jar_module, "Meteor", lambda jar=jar: jar)
    texts = [RIDER, RIDER_PARAPHRASE, "A cat on a couch.", "a cat on a sofa", "two dogs"]
    left = np.array([0, 0, 1, 2, 3, 4])
    right = np.array([0, 1, 0, 3, 2, 0])
    ours = Meteor(texts).pairs(left, right)
    normal = [" ".join(tokens(t)) for t in texts]
    # the reference scores each pair in a request of its own
    expected = [
        jar.compute_score({0: [normal[r]]}, {0: [normal[c]]})[1][0]
        for c, r in zip(left, right, strict=True)
    ]
    assert ours[0] > 0.9  # a caption against itself
    assert ours[1] > ours[5]  # a paraphrase above an unrelated caption
    assert ours == pytest.approx(np.array(expected, dtype=np.float32), abs=1e-6)


@needs_minilm
def test_minilm_ranks_a_paraphrase_above_an_unrelated_caption() -> None:
    from mitl.relevance.neural import MiniLMCosine

    texts = [RIDER, RIDER_PARAPHRASE, "a plate of pasta with tomato sauce"]
    minilm = MiniLMCosine(texts)
    everything = np.arange(3)
    matrix = minilm.matrix(everything, everything)
    assert np.all((matrix >= 0) & (matrix <= 1))
    assert matrix[0, 1] > matrix[0, 2]
    assert minilm.pairs(np.array([0, 0]), np.array([1, 2])) == pytest.approx(
        matrix[0, [1, 2]], abs=1e-6
    )


# --- every registered proxy ----------------------------------------------------------------


def _available_proxies() -> list[str]:
    """Return the proxies this machine can build, METEOR left out (slow, not vectorised)."""
    names = []
    for name in PROXIES:
        if name == "meteor":
            continue
        if proxy_unavailable(name) is not None:  # WordNet or an encoder's packages missing
            continue
        names.append(name)
    return names


@pytest.mark.parametrize("name", _available_proxies())
def test_every_proxy_lies_in_0_1_and_scores_one_on_itself(name: str) -> None:
    groups = list(range(len(REAL_CAPTIONS)))
    proxy = proxy_build(name, REAL_CAPTIONS, groups)
    everything = np.arange(len(REAL_CAPTIONS))
    matrix = proxy.matrix(everything, everything)
    assert matrix.shape == (len(REAL_CAPTIONS), len(REAL_CAPTIONS))
    assert np.all((matrix >= -1e-6) & (matrix <= 1 + 1e-5))
    assert np.diag(matrix) == pytest.approx(np.ones(len(REAL_CAPTIONS)), abs=1e-5)
    assert proxy.pairs(everything, everything) == pytest.approx(np.diag(matrix), abs=1e-5)


def test_an_unknown_proxy_name_is_refused() -> None:
    with pytest.raises(UnknownProxy, match="nope"):
        proxy_build("nope", REAL_CAPTIONS)


# --- image–caption relevance ----------------------------------------------------------------

# 3 images × 2 captions, interleaved so that image order (first appearance) is 20, 10, 30
CORPUS_IMAGES = [20, 10, 20, 30, 10, 30]
CORPUS_TEXTS = [
    "a man riding a horse on the beach",
    "a cat sleeping on a couch",
    "a horse on a sandy beach",
    "a plate of food on a table",
    "a cat lying on a sofa",
    "a man eating food at a table",
]


def _corpus() -> CaptionCorpus:
    return CaptionCorpus.of([101, 102, 103, 104, 105, 106], CORPUS_IMAGES, CORPUS_TEXTS)


def _expected_caption_to_images(proxy, corpus: CaptionCorpus, reduce) -> np.ndarray:
    """Return relevance[c, i] = reduce over i's captions g of proxy(c, g), own pair = 1."""
    n = len(corpus.texts)
    scores = proxy.matrix(np.arange(n), np.arange(n)).astype(np.float64)
    np.fill_diagonal(scores, 1.0)
    out = np.zeros((n, len(corpus.image_ids)))
    for i, image in enumerate(corpus.image_ids):
        members = [c for c in range(n) if CORPUS_IMAGES[c] == image]
        out[:, i] = reduce(scores[:, members], axis=1)
    return out


@pytest.mark.parametrize("name", ["bow", "rouge_l", "cider_d"])
@pytest.mark.parametrize(("aggregation", "reduce"), [("mean", np.mean), ("max", np.max)])
def test_caption_to_images_aggregates_the_image_captions(
    name: str, aggregation: str, reduce
) -> None:
    corpus = _corpus()
    assert corpus.image_ids.tolist() == [20, 10, 30]
    proxy = proxy_build(name, CORPUS_TEXTS, CORPUS_IMAGES)
    everything = np.arange(len(CORPUS_TEXTS))
    expected = _expected_caption_to_images(proxy, corpus, reduce)
    t2i = caption_to_images(proxy, corpus, everything, aggregation=aggregation)
    assert t2i == pytest.approx(expected, abs=1e-6)
    # a subset of queries gives the same rows
    assert caption_to_images(proxy, corpus, np.array([4, 1]), aggregation=aggregation) == (
        pytest.approx(expected[[4, 1]], abs=1e-6)
    )
    # image -> captions is the transpose
    i2t = image_to_captions(proxy, corpus, np.arange(3), aggregation=aggregation)
    assert i2t == pytest.approx(t2i.T, abs=1e-6)
    assert image_to_captions(proxy, corpus, np.array([2]), aggregation=aggregation) == (
        pytest.approx(t2i.T[[2]], abs=1e-6)
    )
    # caption–image pairs pick the matrix entries
    captions = np.array([0, 0, 1, 3, 5, 2])
    images = np.array([0, 1, 1, 2, 0, 0])
    pairs = pair_relevance(proxy, corpus, captions, images, aggregation=aggregation)
    assert pairs == pytest.approx(t2i[captions, images], abs=1e-6)


def test_own_captions_count_as_one() -> None:
    proxy = proxy_build("bow", CORPUS_TEXTS)
    corpus = _corpus()
    t2i = caption_to_images(proxy, corpus, np.arange(6), aggregation="max")
    own = corpus.image_of  # each caption's image index
    assert t2i[np.arange(6), own] == pytest.approx(np.ones(6))


def test_a_wrong_aggregation_is_refused() -> None:
    proxy = proxy_build("bow", CORPUS_TEXTS)
    corpus = _corpus()
    with pytest.raises(ValueError, match="aggregation"):
        caption_to_images(proxy, corpus, np.arange(2), aggregation="median")
    with pytest.raises(ValueError, match="aggregation"):
        image_to_captions(proxy, corpus, np.arange(2), aggregation="sum")
    with pytest.raises(ValueError, match="aggregation"):
        pair_relevance(proxy, corpus, np.array([0]), np.array([0]), aggregation="min")
