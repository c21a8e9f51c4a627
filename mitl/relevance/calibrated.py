"""The calibrated relevance: `calibration`'s combination fitted on every rated image–caption
pair and kept with its feature pipeline, then applied to a whole corpus like a proxy.

A `CalibratedModel` names the caption proxies it reads (each under every aggregation of
`mitl.relevance.images`) with their versions, whether it reads the MiniLM context of
`mitl.relevance.context` and the word coverage of `mitl.relevance.coverage`, the feature
columns in order, the ratings' top score (SITS: 5)
and the fitted regressor pickled, with the pickle's sha256. Its `version` is derived from
all of that, so matrices cached under it are never reused for another model. Relevance is
the prediction divided by the top score, clipped to [0, 1].

Pure Python, numpy and scikit-learn (no Django).
"""

from __future__ import annotations

import hashlib
import json
import pickle
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mitl.relevance.context import Context, grid_context
from mitl.relevance.coverage import (
    COVERAGE_FEATURES,
    COVERAGE_VERSION,
    WORDNET_COVERAGE,
    Coverage,
)
from mitl.relevance.images import CaptionCorpus, Progress, caption_image_grid
from mitl.relevance.neural import embed
from mitl.relevance.proxies import PROXIES, CaptionProxy, proxy_build, proxy_unavailable
from mitl.relevance.wordnet import wordnet_available, wordnet_dir

CALIBRATED = "calibrated"
CONTEXT_ENCODER = "minilm"  # the embeddings the context features read
GRID_PAIRS = 400_000  # image–caption pairs predicted per block (bounds the features held)
# Features are rounded before the trees read them: a pair's features computed as a block or
# one by one differ in the last float bits, and a tree threshold between two such values
# (1/3 summed two ways) would score the same pair differently.
FEATURE_DECIMALS = 4
BAG = 3  # tree models averaged (regressor_make)
NON_GT_WEIGHT = 2.0  # see pair_weights (1, 2, 4, 8 measured: 2 best, by 0.0006)


def pair_weights(ground_truth: np.ndarray) -> np.ndarray:
    """Return each rated pair's weight in the fit: NON_GT_WEIGHT for a pair that is not
    ground truth, 1 for one that is. Ground-truth pairs are rated 4.5–5 and easy; the others
    decide how the images other than a caption's own rank, so they count more."""
    return np.where(np.asarray(ground_truth, dtype=bool), 1.0, NON_GT_WEIGHT)


def feature_columns(features: Mapping[str, np.ndarray], names: Sequence[str]) -> np.ndarray:
    """Return the named features as rounded columns, one row per pair, in `names` order."""
    columns = np.column_stack([np.ravel(features[name]) for name in names])
    return np.round(columns.astype(np.float64), FEATURE_DECIMALS)


class CalibratedModelError(ValueError):
    """A stored model whose bytes do not match its checksum."""


def regressor_make(seed: int = 0) -> Any:
    """Return the unfitted regressor of the combination (the report's and the stored one):
    the mean of BAG gradient-boosted tree models, each splitting on a random half of the
    features (on COCO 5K's SITS a bag of 3 scored 0.8002 out of fold, non-GT Pearson, one
    model on every feature 0.7994, at a third of the prediction cost)."""
    from sklearn.ensemble import HistGradientBoostingRegressor, VotingRegressor

    members = [
        (
            f"trees{k}",
            HistGradientBoostingRegressor(
                max_iter=300,
                learning_rate=0.05,
                max_leaf_nodes=15,
                max_features=0.5,
                random_state=seed + k,
            ),
        )
        for k in range(BAG)
    ]
    return VotingRegressor(members)


@dataclass(frozen=True)
class CalibratedModel:
    proxies: tuple[str, ...]
    proxy_versions: Mapping[str, int]
    context: bool
    coverage: int  # the COVERAGE_VERSION of the word-coverage features it reads, 0: none
    features: tuple[str, ...]  # the regressor's columns, in order
    scale: float  # the ratings' top score: relevance = prediction / scale
    model: bytes  # the fitted regressor, pickled
    sha256: str  # of `model`
    library: str  # what fitted it, e.g. "scikit-learn 1.7.2"

    @property
    def version(self) -> str:
        """Return a short name of everything that decides the model's values."""
        described = json.dumps({**self.spec(), "library": None}, sort_keys=True)
        return hashlib.sha256(described.encode()).hexdigest()[:16]

    def spec(self) -> dict[str, Any]:
        """Return the model's description as JSON-ready values (without the bytes)."""
        return {
            "proxies": list(self.proxies),
            "proxy_versions": dict(self.proxy_versions),
            "context": self.context,
            "coverage": self.coverage,
            "features": list(self.features),
            "scale": self.scale,
            "sha256": self.sha256,
            "library": self.library,
        }

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any], model: bytes) -> CalibratedModel:
        return cls(
            proxies=tuple(spec["proxies"]),
            proxy_versions={k: int(v) for k, v in spec["proxy_versions"].items()},
            context=bool(spec["context"]),
            coverage=int(spec.get("coverage", 0)),
            features=tuple(spec["features"]),
            scale=float(spec["scale"]),
            model=bytes(model),
            sha256=str(spec["sha256"]),
            library=str(spec["library"]),
        )

    def regressor(self) -> Any:
        """Return the fitted regressor; the bytes must match the checksum stored with them
        (the pickle is this platform's own, read back from its database)."""
        if hashlib.sha256(self.model).hexdigest() != self.sha256:
            raise CalibratedModelError("the stored calibrated model does not match its sha256")
        return pickle.loads(self.model)  # our own bytes, checksum checked


def calibrated_fit(
    features: Mapping[str, np.ndarray],
    scores: np.ndarray,
    ground_truth: np.ndarray,
    *,
    proxies: Sequence[str],
    context: bool,
    scale: float,
    seed: int = 0,
) -> CalibratedModel:
    """Fit the combination on every rated pair and return it as a storable model; it reads
    the word-coverage features when `features` holds them."""
    names = tuple(sorted(features))
    regressor = regressor_make(seed)
    regressor.fit(
        feature_columns(features, names), scores, sample_weight=pair_weights(ground_truth)
    )
    blob = pickle.dumps(regressor, protocol=pickle.HIGHEST_PROTOCOL)
    return CalibratedModel(
        proxies=tuple(proxies),
        proxy_versions={name: PROXIES[name].version for name in proxies},
        context=context,
        coverage=COVERAGE_VERSION if COVERAGE_FEATURES[0] in features else 0,
        features=names,
        scale=float(scale),
        model=blob,
        sha256=hashlib.sha256(blob).hexdigest(),
        library=_library(),
    )


def _reads_wordnet(model: CalibratedModel) -> bool:
    return any(name in WORDNET_COVERAGE for name in model.features)


def _library() -> str:
    import sklearn

    return f"scikit-learn {sklearn.__version__}"


def calibrated_unavailable(model: CalibratedModel) -> str | None:
    """Say in one sentence why the model cannot score here (another scikit-learn release, a
    proxy unknown, changed since it was fitted, or missing WordNet, Java or an encoder), or
    None."""
    if model.library != _library():  # a pickle is read back by the release that wrote it
        return (
            f"the calibrated model was fitted with {model.library}, this machine has "
            f"{_library()}: fit it again (relevance_calibrate … --save)"
        )
    if model.coverage not in (0, COVERAGE_VERSION):
        return (
            f"the calibrated model was fitted on word coverage version {model.coverage}, now "
            f"{COVERAGE_VERSION}: fit it again (relevance_calibrate … --save)"
        )
    if _reads_wordnet(model) and not wordnet_available():
        return (
            "the calibrated model cannot score here: its word coverage needs WordNet "
            f"(apt-get install -y wordnet-base; looked in {wordnet_dir()})"
        )
    needed = [*model.proxies, *([CONTEXT_ENCODER] if model.context else [])]
    for name in needed:
        if name not in PROXIES:
            return f"the calibrated model reads the proxy {name}, which this version lacks"
        fitted = model.proxy_versions.get(name, PROXIES[name].version)
        if fitted != PROXIES[name].version:
            return (
                f"the calibrated model was fitted on {name} version {fitted}, now "
                f"{PROXIES[name].version}: fit it again (relevance_calibrate … --save)"
            )
        missing = proxy_unavailable(name)
        if missing:
            return f"the calibrated model cannot score here: {missing}"
    return None


@dataclass(frozen=True, eq=False)
class CalibratedScorer:
    """A model ready to score a corpus: its regressor, built proxies and context."""

    model: CalibratedModel
    regressor: Any
    proxies: Mapping[str, CaptionProxy]
    context: Context | None
    coverage: Coverage | None
    corpus: CaptionCorpus

    def grid(self, captions: np.ndarray, images: np.ndarray) -> np.ndarray:
        """Return the relevance of images `images` (columns) to captions `captions` (rows)."""
        features: dict[str, np.ndarray] = {}
        for name in self.model.proxies:
            blocks = caption_image_grid(self.proxies[name], self.corpus, captions, images)
            features.update({f"{name}/{agg}": block for agg, block in blocks.items()})
        if self.context is not None:
            features.update(grid_context(self.context, captions, images))
        if self.coverage is not None:
            features.update(self.coverage.grid(captions, images))
        x = feature_columns(features, self.model.features)
        predicted = self.regressor.predict(x).reshape(len(captions), len(images))
        return np.clip(predicted / self.model.scale, 0.0, 1.0).astype(np.float32)

    def matrix(
        self, direction: str, queries: np.ndarray, progress: Progress | None = None
    ) -> np.ndarray:
        """Return the relevance of every caption to each image query ("i2t") or of every
        image to each caption query ("t2i"), in blocks with progress."""
        images_all = np.arange(len(self.corpus.image_ids))
        captions_all = np.arange(len(self.corpus.texts))
        rows = captions_all if direction == "i2t" else np.asarray(queries)
        cols = np.asarray(queries) if direction == "i2t" else images_all
        out = np.zeros((len(rows), len(cols)), dtype=np.float32)
        block = max(1, GRID_PAIRS // max(len(cols), 1))
        for start in range(0, len(rows), block):
            out[start : start + block] = self.grid(rows[start : start + block], cols)
            if progress:
                progress(min(start + block, len(rows)), len(rows))
        return out.T.copy() if direction == "i2t" else out


def calibrated_scorer(
    model: CalibratedModel, corpus: CaptionCorpus, *, cache_dir: Path | None = None
) -> CalibratedScorer:
    """Build what the model reads over the corpus (its proxies, and the MiniLM context);
    raise RuntimeError with `calibrated_unavailable`'s sentence when it cannot run here."""
    missing = calibrated_unavailable(model)
    if missing:
        raise RuntimeError(missing)
    built = {
        name: proxy_build(name, corpus.texts, corpus.caption_images, cache_dir=cache_dir)
        for name in model.proxies
    }
    context = None
    if model.context:
        vectors = embed(corpus.texts, cache_dir=cache_dir, encoder=CONTEXT_ENCODER)
        context = Context.of(corpus, vectors)
    coverage = Coverage.of(corpus, wordnet=_reads_wordnet(model)) if model.coverage else None
    return CalibratedScorer(model, model.regressor(), built, context, coverage, corpus)
