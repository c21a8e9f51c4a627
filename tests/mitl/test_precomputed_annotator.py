"""The annotator that replays an external model's scores or rankings (no Django needed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mitl.annotators.base import AnnotatorError, Corpus
from mitl.annotators.precomputed import PrecomputedAnnotator
from mitl.annotators.precomputed_rankings import UNLISTED
from mitl.retrieval.topk import retrieve_i2t, retrieve_t2i

N_IMAGES, PER_IMAGE = 6, 2
IMAGE_IDS = np.arange(40, 40 + N_IMAGES)
CAPTION_IDS = np.arange(900, 900 + N_IMAGES * PER_IMAGE)


def make_corpus() -> Corpus:
    return Corpus(
        image_ids=IMAGE_IDS,
        caption_ids=CAPTION_IDS,
        caption_texts=tuple(f"caption {i}" for i in range(len(CAPTION_IDS))),
        caption_image=np.repeat(np.arange(N_IMAGES), PER_IMAGE),
    )


def prepared(config: dict[str, Any], corpus: Corpus | None = None) -> PrecomputedAnnotator:
    annotator = PrecomputedAnnotator(name="external", config=config)
    annotator.prepare(corpus or make_corpus())
    return annotator


def full_matrix(annotator: PrecomputedAnnotator) -> np.ndarray:
    return annotator.similarity(np.arange(N_IMAGES), np.arange(len(CAPTION_IDS)))


def write_json(path: Path, data: Any) -> str:
    path.write_text(json.dumps(data))
    return str(path)


def shuffled_file_order(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return (file image ids, file caption ids, true scores by corpus row and column).

    The file holds the ids shuffled plus ids the corpus lacks.
    """
    rng = np.random.default_rng(seed)
    truth = rng.standard_normal((N_IMAGES, len(CAPTION_IDS))).astype(np.float32)
    image_ids = rng.permutation(np.r_[IMAGE_IDS, 7, 8])
    caption_ids = rng.permutation(np.r_[CAPTION_IDS, 1, 2, 3])
    return image_ids, caption_ids, truth


def file_matrix(image_ids: np.ndarray, caption_ids: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """Lay `truth` out in the file's row and column order; unknown ids get noise."""
    values = np.full((len(image_ids), len(caption_ids)), 123.0)
    for row, image in enumerate(image_ids):
        for column, caption in enumerate(caption_ids):
            if image in IMAGE_IDS and caption in CAPTION_IDS:
                values[row, column] = truth[image - IMAGE_IDS[0], caption - CAPTION_IDS[0]]
    return values


def test_npz_matrix_is_reindexed_by_external_ids(tmp_path: Path) -> None:
    image_ids, caption_ids, truth = shuffled_file_order(0)
    path = tmp_path / "scores.npz"
    values = file_matrix(image_ids, caption_ids, truth)
    np.savez(path, scores=values, image_ids=image_ids, caption_ids=caption_ids)
    annotator = prepared({"scores": str(path)})
    matrix = full_matrix(annotator)
    assert matrix.dtype == np.float32
    np.testing.assert_array_equal(matrix, truth)
    block = annotator.similarity(np.array([3, 1]), np.array([5, 0, 5]))
    np.testing.assert_array_equal(block, truth[np.ix_([3, 1], [5, 0, 5])])


def test_npy_matrix_with_json_id_lists(tmp_path: Path) -> None:
    image_ids, caption_ids, truth = shuffled_file_order(1)
    np.save(tmp_path / "scores.npy", file_matrix(image_ids, caption_ids, truth))
    config = {
        "scores": str(tmp_path / "scores.npy"),
        "image_ids": write_json(tmp_path / "images.json", image_ids.tolist()),
        "caption_ids": write_json(tmp_path / "captions.json", [str(i) for i in caption_ids]),
    }
    np.testing.assert_array_equal(full_matrix(prepared(config)), truth)


def test_matrix_rankings_follow_the_scores(tmp_path: Path) -> None:
    image_ids, caption_ids, truth = shuffled_file_order(2)
    path = tmp_path / "scores.npz"
    values = file_matrix(image_ids, caption_ids, truth)
    np.savez(path, scores=values, image_ids=image_ids, caption_ids=caption_ids)
    annotator = prepared({"scores": str(path)})
    top = retrieve_i2t(annotator, np.arange(N_IMAGES), 4, n_captions=len(CAPTION_IDS))
    np.testing.assert_array_equal(top.indices, np.argsort(-truth, axis=1)[:, :4])


def test_missing_ids_are_counted_and_the_first_named(tmp_path: Path) -> None:
    path = tmp_path / "scores.npz"
    kept = IMAGE_IDS[[0, 2, 4, 5]]
    np.savez(path, scores=np.zeros((4, len(CAPTION_IDS))), image_ids=kept, caption_ids=CAPTION_IDS)
    with pytest.raises(AnnotatorError, match=r"2 of the dataset's 6 image ids .*first: 41"):
        prepared({"scores": str(path)})


def reference_lists(truth: np.ndarray, depth: int) -> tuple[dict[str, list[int]], ...]:
    """Return i2t and t2i lists cut from one score matrix, `depth` deep, keyed by external id."""
    i2t = {
        str(IMAGE_IDS[image]): CAPTION_IDS[
            np.argsort(-truth[image], kind="stable")[:depth]
        ].tolist()
        for image in range(N_IMAGES)
    }
    t2i = {
        str(CAPTION_IDS[caption]): IMAGE_IDS[
            np.argsort(-truth[:, caption], kind="stable")[:depth]
        ].tolist()
        for caption in range(len(CAPTION_IDS))
    }
    return i2t, t2i


def retrieved_ids(annotator: PrecomputedAnnotator, direction: str, query: int, k: int) -> list[int]:
    """Return the external ids of the top-k targets of one query row."""
    if direction == "i2t":
        top = retrieve_i2t(annotator, np.array([query]), k, n_captions=len(CAPTION_IDS))
        return CAPTION_IDS[top.indices[0]].tolist()
    top = retrieve_t2i(annotator, np.array([query]), k, n_images=N_IMAGES)
    return IMAGE_IDS[top.indices[0]].tolist()


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("depth", [1, 3, 6])
def test_rankings_of_both_directions_are_reproduced(tmp_path: Path, seed: int, depth: int) -> None:
    rng = np.random.default_rng(seed)
    truth = rng.standard_normal((N_IMAGES, len(CAPTION_IDS)))
    i2t, t2i = reference_lists(truth, depth)
    # Only some queries are listed, and the file may know queries the dataset lacks.
    i2t = {key: i2t[key] for key in list(i2t)[::2]} | {"7": [900, 901]}
    t2i = {key: t2i[key] for key in list(t2i)[1::3]}
    annotator = prepared({"rankings": write_json(tmp_path / "r.json", {"i2t": i2t, "t2i": t2i})})
    for key, expected in i2t.items():
        if int(key) in IMAGE_IDS:
            found = retrieved_ids(annotator, "i2t", int(key) - IMAGE_IDS[0], depth)
            assert found == expected
    for key, expected in t2i.items():
        found = retrieved_ids(annotator, "t2i", int(key) - CAPTION_IDS[0], depth)
        assert found == expected


def test_one_direction_scores_minus_the_rank(tmp_path: Path) -> None:
    lists = {"40": [905, 900, 911], "41": [900]}
    annotator = prepared({"rankings": write_json(tmp_path / "r.json", {"i2t": lists})})
    matrix = full_matrix(annotator)
    np.testing.assert_array_equal(matrix[0, [5, 0, 11]], [0, -1, -2])
    assert matrix[1, 0] == 0
    assert (matrix[2:] == UNLISTED).all()
    assert retrieved_ids(annotator, "i2t", 0, 4) == [905, 900, 911, 901]  # then the lowest row
    # Caption 900 was ranked first by image 41 and second by image 40.
    assert retrieved_ids(annotator, "t2i", 0, 2) == [41, 40]


def test_targets_the_dataset_lacks_are_dropped_keeping_the_order(tmp_path: Path) -> None:
    lists = {"902": [45, 1, 41, 2, 43]}
    annotator = prepared({"rankings": write_json(tmp_path / "r.json", {"t2i": lists})})
    assert retrieved_ids(annotator, "t2i", 2, 3) == [45, 41, 43]


def test_consistent_hand_made_lists_are_combined(tmp_path: Path) -> None:
    # Not cut from a matrix, but compatible: one score per pair can satisfy both.
    rankings = {"i2t": {"40": [902, 900]}, "t2i": {"900": [41, 40], "902": [40, 42]}}
    annotator = prepared({"rankings": write_json(tmp_path / "r.json", rankings)})
    assert retrieved_ids(annotator, "i2t", 0, 2) == [902, 900]
    assert retrieved_ids(annotator, "t2i", 0, 2) == [41, 40]
    assert retrieved_ids(annotator, "t2i", 2, 2) == [40, 42]


def test_contradictory_directions_are_refused(tmp_path: Path) -> None:
    # (40, 900) > (40, 901) > (41, 901) > (41, 900) > (40, 900): no single score fits.
    rankings = {
        "i2t": {"40": [900, 901], "41": [901, 900]},
        "t2i": {"900": [41, 40], "901": [40, 41]},
    }
    path = write_json(tmp_path / "cycle.json", rankings)
    with pytest.raises(AnnotatorError, match=r"cycle\.json.*contradict.*image id 4[01]"):
        prepared({"rankings": path})
    # Each direction alone is fine.
    prepared({"rankings": write_json(tmp_path / "i2t.json", {"i2t": rankings["i2t"]})})
    prepared({"rankings": write_json(tmp_path / "t2i.json", {"t2i": rankings["t2i"]})})


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "cannot read it as JSON"),
        ("[1, 2]", "'i2t' and/or 't2i'"),
        ("{}", "'i2t' and/or 't2i'"),
        ('{"i2t": {}, "x2y": {}}', "'i2t' and/or 't2i'"),
        ('{"i2t": [1, 2]}', "must map query ids"),
        ('{"i2t": {"40": 900}}', "must map to a list"),
        ('{"i2t": {"forty": [900]}}', "not an integer id"),
        ('{"i2t": {"40": [900, 900.5]}}', "integer ids, found 900.5"),
        ('{"i2t": {"40": [900, [901]]}}', "integer ids"),
        ('{"i2t": {"40": [900, 901, 900]}}', "repeats the id 900"),
        ('{"i2t": {"40": [900], "040": [901]}}', "named twice"),
        ('{"i2t": {"7": [900]}}', "none of its 1 queries"),
    ],
)
def test_malformed_rankings_are_refused_naming_the_file(
    tmp_path: Path, content: str, message: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(AnnotatorError, match=r"bad\.json") as error:
        prepared({"rankings": str(path)})
    assert message in str(error.value)


def test_malformed_matrices_are_refused_naming_the_file(tmp_path: Path) -> None:
    captions = len(CAPTION_IDS)
    cases: dict[str, tuple[dict[str, Any], str]] = {
        "shape": ({"scores": np.zeros((N_IMAGES, 3))}, "must have shape"),
        "nan": ({"scores": np.full((N_IMAGES, captions), np.nan)}, "NaN"),
        "text": ({"scores": np.full((N_IMAGES, captions), "x")}, "real numbers"),
        "ids": ({"scores": np.zeros((N_IMAGES, captions)), "image_ids": IMAGE_IDS * 0}, "repeats"),
        "lacks": ({"image_ids": IMAGE_IDS}, "lacks the array(s) scores, caption_ids"),
    }
    for name, (arrays, message) in cases.items():
        full = {"scores": np.zeros((N_IMAGES, captions)), "image_ids": IMAGE_IDS}
        full |= {"caption_ids": CAPTION_IDS} | arrays
        if name == "lacks":
            full = arrays
        path = tmp_path / f"{name}.npz"
        np.savez(path, **full)
        with pytest.raises(AnnotatorError, match=rf"{name}\.npz") as error:
            prepared({"scores": str(path)})
        assert message in str(error.value), name


def test_files_that_are_not_what_they_claim_are_refused(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.npz"
    garbage.write_bytes(b"definitely not numpy")
    with pytest.raises(AnnotatorError, match=r"garbage\.npz"):
        prepared({"scores": str(garbage)})
    single = tmp_path / "single.npz"
    np.save(tmp_path / "single.npy", np.zeros((2, 2)))
    (tmp_path / "single.npy").rename(single)
    with pytest.raises(AnnotatorError, match=r"single\.npz.*not an \.npz archive"):
        prepared({"scores": str(single)})
    bad_ids = write_json(tmp_path / "images.json", {"40": 1})
    np.save(tmp_path / "m.npy", np.zeros((N_IMAGES, len(CAPTION_IDS))))
    config = {"scores": str(tmp_path / "m.npy"), "image_ids": bad_ids, "caption_ids": bad_ids}
    with pytest.raises(AnnotatorError, match=r"images\.json"):
        prepared(config)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({}, "exactly one"),
        ({"scores": "a.npz", "rankings": "b.json"}, "exactly one"),
        ({"scores": "scores.csv"}, "unknown file type"),
        ({"rankings": "r.npz"}, "unknown file type"),
        ({"scores": "m.npy"}, "needs the config keys"),
        ({"scores": "s.npz", "image_ids": "i.json"}, "only goes with an .npy"),
        ({"rankings": "missing.json"}, "missing.json"),
        ({"scores": 3}, "must be a file path"),
        ({"ranking": "r.json"}, "unknown config key 'ranking'"),
    ],
)
def test_bad_configs_are_refused(tmp_path: Path, config: dict[str, Any], message: str) -> None:
    for name in ("a.npz", "b.json", "scores.csv", "r.npz", "m.npy", "s.npz", "i.json"):
        (tmp_path / name).write_text("")
    config = {key: str(tmp_path / value) if isinstance(value, str) else value
              for key, value in config.items()}  # fmt: skip
    with pytest.raises(AnnotatorError, match="external") as error:
        PrecomputedAnnotator(name="external", config=config)
    assert message in str(error.value)


def test_similarity_before_prepare_fails(tmp_path: Path) -> None:
    path = write_json(tmp_path / "r.json", {"i2t": {"40": [900]}})
    with pytest.raises(RuntimeError, match="prepare"):
        PrecomputedAnnotator(name="x", config={"rankings": path}).similarity(
            np.array([0]), np.array([0])
        )
