"""METEOR 1.5 between captions through pycocoevalcap's wrapper of the METEOR jar (Java runs
it offline; its paraphrase tables ship inside the jar). Per pair, not vectorised: the jar
scores about a few thousand pairs a second, so METEOR is for rated pairs (calibration) and
small matrices, not for a whole corpus."""

from __future__ import annotations

import shutil
from collections.abc import Sequence

import numpy as np

from mitl.relevance.words import tokens

CHUNK = 2_000  # pairs per EVAL request to the jar


def java_available() -> bool:
    """Say whether a `java` executable is on the PATH (METEOR needs it)."""
    return shutil.which("java") is not None


class Meteor:
    """METEOR of candidate texts against reference texts."""

    def __init__(self, texts: Sequence[str]) -> None:
        """Keep the texts' tokens (lower-case, punctuation dropped, as the jar's -norm does)."""
        if not java_available():
            raise RuntimeError(
                "METEOR needs Java: install a JRE (e.g. apt-get install default-jre)"
            )
        self.texts = [" ".join(tokens(text)) or "." for text in texts]

    def pairs(self, left: np.ndarray, right: np.ndarray) -> np.ndarray:
        """Return METEOR of each candidate `left[i]` against reference `right[i]`."""
        from pycocoevalcap.meteor.meteor import Meteor as MeteorJar

        jar = MeteorJar()
        scores = np.zeros(len(left), dtype=np.float32)
        try:
            for start in range(0, len(left), CHUNK):
                stop = min(start + CHUNK, len(left))
                keys = range(start, stop)
                gts = {k: [self.texts[right[k]]] for k in keys}
                res = {k: [self.texts[left[k]]] for k in keys}
                _, chunk = jar.compute_score(gts, res)
                scores[start:stop] = chunk
        finally:
            del jar
        return scores

    def matrix(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """Return METEOR of candidates `rows` against references `cols` (pair by pair)."""
        left = np.repeat(np.asarray(rows), len(cols))
        right = np.tile(np.asarray(cols), len(rows))
        return self.pairs(left, right).reshape(len(rows), len(cols))
