"""The named caption–caption relevance proxies, each a class with `matrix` and `pairs`.

Every proxy reads the same list of texts (a dataset's captions, plus any others) once, then
scores candidates against references by position: `matrix(rows, cols)` is a dense float32
block, `pairs(left, right)` one value per pair. Values lie in [0, 1] (CIDEr-D is divided by
10) and a caption scores 1 against itself, except under CIDEr-D when it has fewer than four
words (the n-gram orders it lacks count 0); image relevance (`mitl.relevance.images`)
counts a caption's own pair as 1 whatever the proxy. `version` changes whenever a proxy's values
change, so cached matrices (`pipeline.relevance`) are never reused across versions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from mitl.annotators.encoders import encoder_missing
from mitl.relevance.cider import CiderD
from mitl.relevance.lexical import SetOverlap, bow_items, pos_items, synset_items
from mitl.relevance.meteor import Meteor, java_available
from mitl.relevance.neural import EncoderCosine, MiniLMCosine
from mitl.relevance.rouge import RougeL
from mitl.relevance.wordnet import wordnet_available, wordnet_dir


class CaptionProxy(Protocol):
    def matrix(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray: ...

    def pairs(self, left: np.ndarray, right: np.ndarray) -> np.ndarray: ...


Build = Callable[[Sequence[str], Sequence[int] | None, Path | None], CaptionProxy]


@dataclass(frozen=True)
class ProxySpec:
    name: str
    version: int
    cheap: bool  # vectorised: a whole corpus against its queries in minutes on a CPU
    needs: str  # what must be installed beyond the Python packages ("" when nothing)
    summary: str
    build: Build
    encoder: str | None = None  # the packaged sentence encoder it needs, if any


PROXIES: dict[str, ProxySpec] = {
    spec.name: spec
    for spec in (
        ProxySpec(
            "bow", 1, True, "", "IoU of the word sets, stop words left out (Wray et al.)",
            lambda texts, groups, cache: SetOverlap(texts, bow_items),
        ),
        ProxySpec(
            "pos", 1, True, "WordNet", "IoU of noun and verb lemmas, 0.5 each (Wray et al.)",
            lambda texts, groups, cache: SetOverlap(texts, pos_items),
        ),
        ProxySpec(
            "synset", 1, True, "WordNet", "IoU of noun and verb WordNet synsets (Wray et al.)",
            lambda texts, groups, cache: SetOverlap(texts, synset_items),
        ),
        ProxySpec(
            "meteor", 1, False, "Java", "METEOR 1.5 (pycocoevalcap's jar; Wray et al.)",
            lambda texts, groups, cache: Meteor(texts),
        ),
        ProxySpec(
            "rouge_l", 1, True, "", "ROUGE-L F, beta 1.2 (Messina et al.)",
            lambda texts, groups, cache: RougeL(texts),
        ),
        ProxySpec(
            "cider_d", 1, True, "", "CIDEr-D / 10, idf over images (Biten et al.)",
            lambda texts, groups, cache: CiderD(texts, groups),
        ),
        ProxySpec(
            "minilm", 1, True, "", "cosine of all-MiniLM-L6-v2 sentence embeddings",
            lambda texts, groups, cache: MiniLMCosine(texts, cache_dir=cache),
            encoder="minilm",
        ),
        ProxySpec(
            "mpnet", 1, True, "", "cosine of all-mpnet-base-v2 sentence embeddings (optional)",
            lambda texts, groups, cache: EncoderCosine(texts, cache_dir=cache, encoder="mpnet"),
            encoder="mpnet",
        ),
    )
}  # fmt: skip


class UnknownProxy(ValueError):
    """A proxy name that is not one of `PROXIES`."""


def proxy_spec(name: str) -> ProxySpec:
    """Return the named proxy's spec, or raise UnknownProxy listing the known names."""
    try:
        return PROXIES[name]
    except KeyError:
        raise UnknownProxy(
            f"unknown relevance proxy {name!r}; known: {', '.join(PROXIES)}"
        ) from None


def proxy_build(
    name: str,
    texts: Sequence[str],
    groups: Sequence[int] | None = None,
    *,
    cache_dir: Path | None = None,
) -> CaptionProxy:
    """Build the named proxy over the texts (`groups`: each text's image, for CIDEr-D's idf;
    `cache_dir`: where sentence embeddings of the same texts are kept between runs)."""
    return proxy_spec(name).build(texts, groups, cache_dir)


def proxy_unavailable(name: str) -> str | None:
    """Say why the named proxy cannot run here (WordNet, Java or an encoder's packages
    missing), or None."""
    spec = proxy_spec(name)
    if spec.encoder is not None:
        return encoder_missing(spec.encoder)
    if spec.needs == "WordNet" and not wordnet_available():
        return f"{name} needs WordNet (apt-get install -y wordnet-base; looked in {wordnet_dir()})"
    if spec.needs == "Java" and not java_available():
        return f"{name} needs Java (a JRE on the PATH)"
    return None
