"""WordNet 3.0 read offline from Debian's `wordnet-base` files through NLTK's reader.

NLTK downloads its own copy of WordNet at run time; this product never downloads anything,
so it points NLTK's `WordNetCorpusReader` at the database files Debian installs in
`/usr/share/wordnet` (`WORDNET_DIR` overrides). Debian leaves out one small file the reader
needs, `lexnames` (the 45 lexicographer file names, listed in wndb(5WN)); it is served from
the list below.
"""

from __future__ import annotations

import io
import os
import warnings
from functools import cache
from pathlib import Path
from typing import IO, Any

DEFAULT_WORDNET_DIR = "/usr/share/wordnet"
REQUIRED_FILES = ("data.noun", "index.noun", "data.verb", "index.verb", "noun.exc", "verb.exc")

# number, name and syntactic category (1 noun, 2 verb, 3 adjective, 4 adverb) of each
# lexicographer file of WordNet 3.0.
LEXNAMES = [
    ("adj.all", 3), ("adj.pert", 3), ("adv.all", 4), ("noun.Tops", 1), ("noun.act", 1),
    ("noun.animal", 1), ("noun.artifact", 1), ("noun.attribute", 1), ("noun.body", 1),
    ("noun.cognition", 1), ("noun.communication", 1), ("noun.event", 1), ("noun.feeling", 1),
    ("noun.food", 1), ("noun.group", 1), ("noun.location", 1), ("noun.motive", 1),
    ("noun.object", 1), ("noun.person", 1), ("noun.phenomenon", 1), ("noun.plant", 1),
    ("noun.possession", 1), ("noun.process", 1), ("noun.quantity", 1), ("noun.relation", 1),
    ("noun.shape", 1), ("noun.state", 1), ("noun.substance", 1), ("noun.time", 1),
    ("verb.body", 2), ("verb.change", 2), ("verb.cognition", 2), ("verb.communication", 2),
    ("verb.competition", 2), ("verb.consumption", 2), ("verb.contact", 2), ("verb.creation", 2),
    ("verb.emotion", 2), ("verb.motion", 2), ("verb.perception", 2), ("verb.possession", 2),
    ("verb.social", 2), ("verb.stative", 2), ("verb.weather", 2), ("adj.ppl", 3),
]  # fmt: skip


class WordNetMissing(RuntimeError):
    """WordNet's database files are not installed where they are looked for."""


def wordnet_dir() -> Path:
    """Return the directory WordNet is read from (`WORDNET_DIR`, else Debian's)."""
    return Path(os.environ.get("WORDNET_DIR") or DEFAULT_WORDNET_DIR)


def wordnet_available() -> bool:
    """Say whether WordNet's database files are installed."""
    root = wordnet_dir()
    return all((root / name).is_file() for name in REQUIRED_FILES)


@cache
def wordnet() -> Any:
    """Return NLTK's WordNet reader over the installed files (loaded once per process)."""
    if not wordnet_available():
        raise WordNetMissing(
            f"WordNet 3.0 is not installed in {wordnet_dir()} (needed by the pos and synset "
            "proxies): install Debian's wordnet-base (apt-get install -y wordnet-base) or set "
            "WORDNET_DIR to a directory holding its data.* and index.* files"
        )
    import nltk.data
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    root = str(wordnet_dir().resolve())
    if root not in nltk.data.path:
        nltk.data.path.append(root)  # NLTK reads only from directories on its data path

    class DebianWordNet(WordNetCorpusReader):  # type: ignore[misc]
        def open(self, file: str) -> IO[str]:
            if file == "lexnames":
                lines = (f"{i:02d}\t{name}\t{kind}\n" for i, (name, kind) in enumerate(LEXNAMES))
                return io.StringIO("".join(lines))
            return super().open(file)

        def map_wn(self, version: str = "wordnet") -> None:
            return None  # the mapping to WordNet 3.0 serves other languages' wordnets only

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The multilingual functions")
        return DebianWordNet(root, None)
