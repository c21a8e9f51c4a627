"""Image files for a dataset import: from a folder, a zip file, or an S3 bucket and prefix.

A source answers whether it holds a file name (relative, `/`-separated) and reads one file
at a time. Every read is capped in size and checked to be an image Pillow can open and
verify, so an import refuses decompression bombs and files that are not images with a
message that names the entry. A zip is checked as a whole when it is opened, from its
directory and before anything is unpacked: entries that would land outside the target
folder (`../`, absolute paths, links), entries that would unpack to too much, and a zip
that would unpack to too much in all (bytes, or times its own size) refuse the whole file.
The bytes actually unpacked are counted against the same allowance as they are read.
"""

from __future__ import annotations

import io
import re
import stat
import warnings
import zipfile
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO

from PIL import Image, UnidentifiedImageError

from mitl.formats.common import ImportFileError

# Formats a dataset image may have. Pillow's other plugins (EPS, PSD, ...) are never tried:
# fewer parsers see untrusted bytes, and EPS would hand them to Ghostscript on load.
IMAGE_FORMATS = ("JPEG", "PNG", "WEBP", "GIF", "BMP", "TIFF")
_RATIO_FLOOR = 1 << 20  # below 1 MiB unpacked (an entry, or a zip in all), any ratio is harmless


@dataclass(frozen=True)
class ImageLimits:
    """How much an import may unpack; the defaults fit MS-COCO with a wide margin."""

    max_file_bytes: int = 64 << 20  # one image file (COCO's largest is under 1 MiB)
    max_total_bytes: int = 64 << 30  # everything a zip unpacks to (COCO train2014: 13 GB)
    # Unpacked / packed size of a zip entry, and of a whole zip (its entries' sizes over the
    # zip file's): JPEG and PNG files barely shrink, so a real image zip is close to 1.
    max_ratio: float = 100.0
    max_pixels: int = Image.MAX_IMAGE_PIXELS or 89_478_485  # Pillow's own bomb limit


class ImageSourceError(ImportFileError):
    """An image source or one of its files is refused; the message names the entry."""


def name_problem(name: str) -> str | None:
    """Say why a relative file name is unsafe to store or unpack, or None when it is fine."""
    if not name or "\x00" in name:
        return "is empty or holds a NUL character"
    posix = name.replace("\\", "/")  # a Windows separator would escape on Windows
    if posix.startswith("/") or re.match(r"^[A-Za-z]:", posix):
        return "is an absolute path"
    if ".." in PurePosixPath(posix).parts:
        return "escapes the target folder"
    return None


class ImageSource(ABC):
    """Where an import reads image files from; `label` names it in messages."""

    label: str

    def __init__(self, limits: ImageLimits | None = None) -> None:
        self.limits = limits or ImageLimits()

    @abstractmethod
    def contains(self, name: str) -> bool:
        """Say whether the source holds a file with this relative name."""

    @abstractmethod
    def _read(self, name: str) -> bytes:
        """Return the file's bytes, refusing more than `limits.max_file_bytes`."""

    @abstractmethod
    def where(self, name: str) -> str:
        """Name one file of the source for a message."""

    def read(self, name: str) -> bytes:
        """Return an image file's bytes after checking that they are a sound image."""
        data = self._read(name)
        image_check(self.where(name), io.BytesIO(data), self.limits, verify=True)
        return data

    def items(self, names: Iterable[str]) -> Iterator[tuple[str, bytes]]:
        """Yield (file name, checked bytes) for each name, one file in memory at a time."""
        for name in names:
            yield name, self.read(name)

    def close(self) -> None:  # noqa: B027 - most sources hold nothing open
        """Release what the source holds open."""

    def __enter__(self) -> ImageSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _too_big(self, name: str, size: int) -> ImageSourceError:
        return ImageSourceError(
            f"{self.where(name)}: {size} bytes, more than the "
            f"{self.limits.max_file_bytes} allowed per image file"
        )


def image_check(where: str, stream: IO[bytes], limits: ImageLimits, *, verify: bool) -> str:
    """Refuse what is not an image of IMAGE_FORMATS or has too many pixels; return the format.

    Without `verify` only the header is read, which is cheap enough to run on every file
    of an upload before the request is answered.
    """
    with warnings.catch_warnings():
        # Pillow only warns between MAX_IMAGE_PIXELS and twice that; refuse there too.
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        try:
            with Image.open(stream, formats=IMAGE_FORMATS) as picture:
                width, height = picture.size
                if width * height > limits.max_pixels:
                    raise ImageSourceError(
                        f"{where}: refused as a decompression bomb ({width}×{height} pixels, "
                        f"more than the {limits.max_pixels} allowed)"
                    )
                if verify:
                    picture.verify()
                return str(picture.format)
        except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
            raise ImageSourceError(f"{where}: refused as a decompression bomb ({exc})") from exc
        except UnidentifiedImageError:
            raise ImageSourceError(
                f"{where}: not a readable image (not one of {', '.join(IMAGE_FORMATS)})"
            ) from None
        except (OSError, SyntaxError, ValueError, EOFError) as exc:  # Pillow's corrupt-file errors
            raise ImageSourceError(f"{where}: not a readable image ({exc})") from exc


class FolderImageSource(ImageSource):
    """Image files under a folder; names (and links) that lead outside it are refused."""

    def __init__(self, root: Path, limits: ImageLimits | None = None) -> None:
        super().__init__(limits)
        if not root.is_dir():
            raise ImageSourceError(f"{root}: not a directory")
        self.root = root
        self._resolved = root.resolve()
        self.label = str(root)

    def where(self, name: str) -> str:
        return str(self.root / name)

    def _path(self, name: str) -> Path:
        path = (self.root / name).resolve()
        if self._resolved not in path.parents:
            raise ImageSourceError(f"{self.root}: file_name {name!r} escapes the image folder")
        return path

    def contains(self, name: str) -> bool:
        return self._path(name).is_file()

    def _read(self, name: str) -> bytes:
        path = self._path(name)
        try:
            with path.open("rb") as handle:
                data = handle.read(self.limits.max_file_bytes + 1)
        except OSError as exc:
            raise ImageSourceError(f"{self.where(name)}: cannot read ({exc.strerror})") from exc
        if len(data) > self.limits.max_file_bytes:
            raise self._too_big(name, path.stat().st_size)
        return data


class ZipImageSource(ImageSource):
    """Image files inside a zip, checked as a whole on opening (escapes, links, bombs)."""

    def __init__(self, path: Path, limits: ImageLimits | None = None, *, label: str = "") -> None:
        super().__init__(limits)
        self.label = label or str(path)
        try:
            self._zip = zipfile.ZipFile(path)
            self._size = Path(path).stat().st_size
        except (zipfile.BadZipFile, OSError) as exc:
            raise ImageSourceError(f"{self.label}: not a readable zip file ({exc})") from exc
        self._unpacked = 0  # bytes read so far; an entry read again is not counted again
        self._read_names: set[str] = set()
        try:
            self._entries = self._check_entries()
        except BaseException:
            self._zip.close()
            raise

    def _allowance(self) -> int:
        """What the whole zip may unpack to: its total cap, and its size times the ratio."""
        limits = self.limits
        by_ratio = max(_RATIO_FLOOR, int(self._size * limits.max_ratio))
        return min(limits.max_total_bytes, by_ratio)

    def _check_entries(self) -> dict[str, zipfile.ZipInfo]:
        limits = self.limits
        entries: dict[str, zipfile.ZipInfo] = {}
        total = 0
        for info in self._zip.infolist():
            name = info.filename
            problem = name_problem(name)
            if problem:
                raise ImageSourceError(f"{self.where(name)} {problem}; the zip is refused")
            if stat.S_ISLNK(info.external_attr >> 16):
                raise ImageSourceError(f"{self.where(name)} is a symbolic link; the zip is refused")
            if info.is_dir():
                continue
            if info.flag_bits & 0x1:
                raise ImageSourceError(f"{self.where(name)} is encrypted; the zip is refused")
            if info.file_size > limits.max_file_bytes:
                raise ImageSourceError(
                    f"{self.where(name)} unpacks to {info.file_size} bytes, more than the "
                    f"{limits.max_file_bytes} allowed per file; the zip is refused"
                )
            ratio = info.file_size / max(info.compress_size, 1)
            if info.file_size > _RATIO_FLOOR and ratio > limits.max_ratio:
                raise ImageSourceError(
                    f"{self.where(name)} is refused as a decompression bomb: "
                    f"{info.compress_size} bytes unpack to {info.file_size} (ratio {ratio:.0f}, "
                    f"at most {limits.max_ratio:g} allowed)"
                )
            total += info.file_size
            if total > limits.max_total_bytes:
                raise ImageSourceError(
                    f"{self.label}: unpacks to more than the {limits.max_total_bytes} bytes "
                    f"allowed in all (at entry {name!r}); the zip is refused"
                )
            if name in entries:
                raise ImageSourceError(f"{self.where(name)} appears twice; the zip is refused")
            entries[name] = info
        # Entries under 1 MiB skip their own ratio check; together they may not.
        ratio = total / max(self._size, 1)
        if total > _RATIO_FLOOR and ratio > limits.max_ratio:
            raise ImageSourceError(
                f"{self.label}: refused as a zip bomb: its {self._size} bytes unpack to "
                f"{total} in all (ratio {ratio:.0f}, at most {limits.max_ratio:g} allowed)"
            )
        return entries

    def where(self, name: str) -> str:
        return f"{self.label}: entry {name!r}"

    def contains(self, name: str) -> bool:
        return name in self._entries

    def names(self) -> list[str]:
        """List the zip's files (no folders), in the zip's order."""
        return list(self._entries)

    def _read(self, name: str) -> bytes:
        try:
            with self._zip.open(self._entries[name]) as handle:
                data = handle.read(self.limits.max_file_bytes + 1)
        except KeyError:
            raise ImageSourceError(f"{self.where(name)} is not in the zip") from None
        except (zipfile.BadZipFile, OSError, EOFError, NotImplementedError) as exc:
            raise ImageSourceError(f"{self.where(name)}: cannot unpack ({exc})") from exc
        if len(data) > self.limits.max_file_bytes:  # the directory lied about the size
            raise self._too_big(name, len(data))
        if name not in self._read_names:
            self._read_names.add(name)
            self._unpacked += len(data)
        allowance = self._allowance()
        if self._unpacked > allowance:  # the directory lied about the total
            raise ImageSourceError(
                f"{self.where(name)}: the zip unpacked to more than the {allowance} bytes "
                "allowed in all; the zip is refused"
            )
        return data

    def check_header(self, name: str) -> str:
        """Check an entry's image header only (format, pixel count); return its format."""
        try:
            with self._zip.open(self._entries[name]) as handle:
                return image_check(self.where(name), handle, self.limits, verify=False)
        except (zipfile.BadZipFile, NotImplementedError) as exc:
            raise ImageSourceError(f"{self.where(name)}: cannot unpack ({exc})") from exc

    def close(self) -> None:
        self._zip.close()


_S3_URI = re.compile(r"^s3://(?P<bucket>[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9])(?:/(?P<prefix>.*))?$")


def s3_uri_parse(uri: str) -> tuple[str, str]:
    """Split `s3://bucket/prefix` into the bucket and a prefix that is empty or ends in `/`."""
    match = _S3_URI.match(uri.strip())
    if match is None:
        raise ImageSourceError(
            f"{uri!r} is not an S3 location; write s3://<bucket>/<prefix> (bucket names are "
            "3-63 lower-case letters, digits, dots and hyphens)"
        )
    prefix = (match["prefix"] or "").strip("/")
    return match["bucket"], f"{prefix}/" if prefix else ""


class S3ImageSource(ImageSource):
    """Image files under an S3 prefix, on AWS or any S3-compatible endpoint (e.g. MinIO).

    Credentials come from the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY), as
    boto3 reads them; the prefix is listed once, on first use.
    """

    def __init__(
        self,
        uri: str,
        *,
        endpoint_url: str | None = None,
        region: str | None = None,
        limits: ImageLimits | None = None,
    ) -> None:
        super().__init__(limits)
        self.bucket, self.prefix = s3_uri_parse(uri)
        self.label = f"s3://{self.bucket}/{self.prefix}"
        import boto3  # imported here: only S3 imports need it
        from botocore.config import Config

        # Path-style addressing: S3-compatible servers (MinIO) rarely have bucket DNS names.
        config = Config(s3={"addressing_style": "path"}) if endpoint_url else None
        self._client = boto3.client(
            "s3", endpoint_url=endpoint_url, region_name=region, config=config
        )
        self._sizes: dict[str, int] | None = None

    def where(self, name: str) -> str:
        return f"{self.label}{name}"

    def _listing(self) -> dict[str, int]:
        if self._sizes is None:
            sizes: dict[str, int] = {}
            pages = self._client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=self.prefix
            )
            with _s3_errors(self.label, "cannot list"):
                for page in pages:
                    for item in page.get("Contents", []):
                        sizes[item["Key"][len(self.prefix) :]] = int(item["Size"])
            self._sizes = sizes
        return self._sizes

    def contains(self, name: str) -> bool:
        return name in self._listing()

    def names(self) -> list[str]:
        """List the files under the prefix, relative to it."""
        return sorted(self._listing())

    def _read(self, name: str) -> bytes:
        size = self._listing().get(name)
        if size is not None and size > self.limits.max_file_bytes:
            raise self._too_big(name, size)
        with _s3_errors(self.where(name), "cannot read"):
            body = self._client.get_object(Bucket=self.bucket, Key=self.prefix + name)["Body"]
            try:
                data = body.read(self.limits.max_file_bytes + 1)
            finally:
                body.close()
        if len(data) > self.limits.max_file_bytes:
            raise self._too_big(name, len(data))
        return data


@contextmanager
def _s3_errors(where: str, doing: str) -> Iterator[None]:
    """Turn boto3's errors into ImageSourceError naming the location and what failed."""
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

    try:
        yield
    except NoCredentialsError as exc:
        raise ImageSourceError(
            f"{where}: {doing}: no S3 credentials (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)"
        ) from exc
    except ClientError as exc:
        error = exc.response.get("Error", {})
        raise ImageSourceError(
            f"{where}: {doing} ({error.get('Code', '?')}: {error.get('Message', '')})"
        ) from exc
    except BotoCoreError as exc:
        raise ImageSourceError(f"{where}: {doing} ({exc})") from exc


def image_source_open(
    spec: str | Path,
    *,
    endpoint_url: str | None = None,
    region: str | None = None,
    limits: ImageLimits | None = None,
) -> ImageSource:
    """Open a folder, a `.zip` file or an `s3://bucket/prefix` as an image source."""
    text = str(spec)
    if text.startswith("s3://"):
        return S3ImageSource(text, endpoint_url=endpoint_url, region=region, limits=limits)
    path = Path(spec)
    if path.is_dir():
        return FolderImageSource(path, limits)
    if path.is_file():
        return ZipImageSource(path, limits)
    raise ImageSourceError(f"{path}: no such folder or zip file")
