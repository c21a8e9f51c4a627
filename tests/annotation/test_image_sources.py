"""Image sources: folders and zips yield checked image bytes; unsafe zips, bombs and files
that are not images are refused with a message that names the entry. (S3: test_s3_storage.)"""

from __future__ import annotations

import io
import random
import stat
import struct
import zipfile
import zlib
from pathlib import Path

import pytest
from PIL import Image

from annotation.imports.image_sources import (
    FolderImageSource,
    ImageLimits,
    ImageSourceError,
    S3ImageSource,
    ZipImageSource,
    image_check,
    image_source_open,
    name_problem,
    s3_uri_parse,
)


def png_bytes(color: str = "red", size: tuple[int, int] = (4, 4)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, color).save(out, format="PNG")
    return out.getvalue()


def png_header_only(width: int, height: int) -> bytes:
    """A PNG that claims `width`×`height` pixels in a few dozen bytes (a pixel bomb)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b"\x00" * 16))
        + chunk(b"IEND", b"")
    )


def write_zip(path: Path, entries: dict[str, bytes], *, stored: bool = False) -> Path:
    method = zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED
    with zipfile.ZipFile(path, "w", compression=method) as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
    return path


GOOD = {"a.png": png_bytes("red"), "sub/b.png": png_bytes("blue")}


# --- names ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("a.png", None),
        ("val2014/COCO_val2014_000000391895.jpg", None),
        ("..a.png", None),  # dots inside a name are fine
        ("../a.png", "escapes"),
        ("sub/../../a.png", "escapes"),
        ("sub\\..\\..\\a.png", "escapes"),  # Windows separators count too
        ("/etc/passwd", "absolute"),
        ("C:/Windows/a.png", "absolute"),
        ("", "empty"),
        ("a\x00.png", "NUL"),
    ],
)
def test_name_problem_flags_names_that_leave_the_target_folder(name, problem):
    found = name_problem(name)
    assert (found is None) if problem is None else (problem in found)


# --- folders ---------------------------------------------------------------------------------


def test_folder_source_yields_file_names_and_their_bytes(tmp_path):
    for name, data in GOOD.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(data)
    source = FolderImageSource(tmp_path)

    assert source.contains("sub/b.png") and not source.contains("c.png")
    assert dict(source.items(["a.png", "sub/b.png"])) == GOOD


def test_folder_source_refuses_a_link_that_leads_outside(tmp_path):
    outside = tmp_path / "secret.png"
    outside.write_bytes(png_bytes())
    root = tmp_path / "images"
    root.mkdir()
    (root / "link.png").symlink_to(outside)

    with pytest.raises(ImageSourceError, match=r"'link\.png' escapes the image folder"):
        FolderImageSource(root).read("link.png")


def test_folder_source_refuses_a_file_that_is_not_an_image(tmp_path):
    (tmp_path / "notes.png").write_text("not a picture")
    with pytest.raises(ImageSourceError) as info:
        FolderImageSource(tmp_path).read("notes.png")
    assert str(info.value).startswith(f"{tmp_path / 'notes.png'}: not a readable image")


def test_folder_source_refuses_a_file_over_the_size_limit(tmp_path):
    (tmp_path / "a.png").write_bytes(GOOD["a.png"])
    small = ImageLimits(max_file_bytes=len(GOOD["a.png"]) - 1)
    with pytest.raises(ImageSourceError, match=r"more than the \d+ allowed per image file"):
        FolderImageSource(tmp_path, small).read("a.png")


def test_folder_that_does_not_exist_is_refused(tmp_path):
    with pytest.raises(ImageSourceError, match="not a directory"):
        FolderImageSource(tmp_path / "nope")


# --- zips ------------------------------------------------------------------------------------


def test_zip_source_yields_its_images_and_skips_folders(tmp_path):
    path = write_zip(tmp_path / "images.zip", {"sub/": b"", **GOOD})
    with ZipImageSource(path) as source:
        assert source.names() == ["a.png", "sub/b.png"]
        assert dict(source.items(source.names())) == GOOD
        assert source.check_header("sub/b.png") == "PNG"


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ("../evil.png", "escapes the target folder"),
        ("sub/../../evil.png", "escapes the target folder"),
        ("/etc/evil.png", "is an absolute path"),
        ("C:\\evil.png", "is an absolute path"),
    ],
)
def test_zip_with_an_entry_escaping_the_target_is_refused_as_a_whole(tmp_path, entry, problem):
    path = write_zip(tmp_path / "images.zip", {**GOOD, entry: png_bytes()})
    with pytest.raises(ImageSourceError) as info:
        ZipImageSource(path)
    assert str(info.value) == f"{path}: entry {entry!r} {problem}; the zip is refused"


def test_zip_with_a_symbolic_link_is_refused(tmp_path):
    path = tmp_path / "images.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("a.png", GOOD["a.png"])
        link = zipfile.ZipInfo("b.png")
        link.create_system = 3  # Unix, where the mode bits live
        link.external_attr = (stat.S_IFLNK | 0o777) << 16
        archive.writestr(link, "/etc/passwd")
    with pytest.raises(ImageSourceError, match=r"entry 'b\.png' is a symbolic link"):
        ZipImageSource(path)


def test_zip_bomb_is_refused_by_its_compression_ratio(tmp_path):
    path = write_zip(tmp_path / "bomb.zip", {**GOOD, "zeros.png": b"\x00" * (8 << 20)})
    with pytest.raises(ImageSourceError) as info:
        ZipImageSource(path)
    message = str(info.value)
    assert message.startswith(f"{path}: entry 'zeros.png' is refused as a decompression bomb")
    assert "unpack to 8388608" in message


def test_zip_bomb_of_many_small_entries_is_refused_by_the_whole_archive_ratio(tmp_path):
    # Each entry is under 1 MiB, where an entry's own ratio is not checked; together they
    # unpack to 1,000 times the archive's size.
    entries = {f"zeros{i}.bmp": b"\x00" * ((1 << 20) - 1) for i in range(24)}
    path = write_zip(tmp_path / "bomb.zip", {**GOOD, **entries})
    size, total = path.stat().st_size, sum(map(len, {**GOOD, **entries}.values()))
    assert size < 100_000 and total > 24 << 20

    with pytest.raises(ImageSourceError) as info:
        ZipImageSource(path)

    message = str(info.value)
    assert message.startswith(
        f"{path}: refused as a zip bomb: its {size} bytes unpack to {total} in all (ratio "
    )
    assert message.endswith(", at most 100 allowed)")


def test_zip_of_images_that_barely_compress_is_accepted(tmp_path):
    noise = Image.frombytes("RGB", (400, 400), random.Random(7).randbytes(400 * 400 * 3))
    entries = {}
    for index, fmt in enumerate(["PNG", "JPEG", "PNG", "BMP"]):
        out = io.BytesIO()
        noise.rotate(90 * index).save(out, format=fmt)
        entries[f"img{index}.{fmt.lower()}"] = out.getvalue()
    path = write_zip(tmp_path / "images.zip", entries)
    assert sum(map(len, entries.values())) > 1 << 20  # over the floor of the ratio check

    with ZipImageSource(path) as source:
        assert dict(source.items(source.names())) == entries


def test_zip_that_unpacks_to_under_a_mib_may_have_any_ratio(tmp_path):
    path = write_zip(tmp_path / "small.zip", {**GOOD, "zeros.bmp": b"\x00" * (512 << 10)})
    with ZipImageSource(path) as source:
        assert source.contains("zeros.bmp")


def test_bytes_read_from_a_zip_are_capped_whatever_its_directory_said(tmp_path):
    path = write_zip(tmp_path / "images.zip", GOOD, stored=True)
    with ZipImageSource(path) as source:
        # As if the directory had claimed fewer bytes than the entries hold.
        source.limits = ImageLimits(max_total_bytes=len(GOOD["a.png"]) + 1)
        assert source.read("a.png") == source.read("a.png")  # a file read twice counts once
        with pytest.raises(ImageSourceError) as info:
            source.read("sub/b.png")
    assert str(info.value) == (
        f"{path}: entry 'sub/b.png': the zip unpacked to more than the "
        f"{len(GOOD['a.png']) + 1} bytes allowed in all; the zip is refused"
    )


def test_zip_entry_over_the_per_file_limit_is_refused(tmp_path):
    path = write_zip(tmp_path / "images.zip", GOOD, stored=True)
    limits = ImageLimits(max_file_bytes=min(map(len, GOOD.values())) - 1)
    with pytest.raises(ImageSourceError, match=r"entry 'a\.png' unpacks to \d+ bytes, more"):
        ZipImageSource(path, limits)


def test_zip_over_the_total_limit_is_refused(tmp_path):
    path = write_zip(tmp_path / "images.zip", GOOD, stored=True)
    limits = ImageLimits(max_total_bytes=len(GOOD["a.png"]) + 1)
    with pytest.raises(ImageSourceError, match=r"allowed in all \(at entry 'sub/b\.png'\)"):
        ZipImageSource(path, limits)


def test_zip_with_a_repeated_entry_is_refused(tmp_path):
    path = tmp_path / "images.zip"
    with pytest.warns(UserWarning, match="Duplicate name"):
        write_zip(path, {}, stored=True)
        with zipfile.ZipFile(path, "a") as archive:
            archive.writestr("a.png", GOOD["a.png"])
            archive.writestr("a.png", png_bytes("green"))
    with pytest.raises(ImageSourceError, match=r"entry 'a\.png' appears twice"):
        ZipImageSource(path)


def test_file_that_is_not_a_zip_is_refused(tmp_path):
    path = tmp_path / "images.zip"
    path.write_bytes(b"PK but not really")
    with pytest.raises(ImageSourceError, match="not a readable zip file"):
        ZipImageSource(path)


def test_zip_entry_that_is_not_an_image_is_refused_naming_it(tmp_path):
    path = write_zip(tmp_path / "images.zip", {**GOOD, "readme.png": b"plain text"})
    with ZipImageSource(path) as source:
        assert source.read("a.png") == GOOD["a.png"]
        with pytest.raises(ImageSourceError) as info:
            source.read("readme.png")
        assert str(info.value).startswith(f"{path}: entry 'readme.png': not a readable image")
        with pytest.raises(ImageSourceError, match=r"readme\.png': not a readable image"):
            source.check_header("readme.png")


def test_truncated_image_fails_verification(tmp_path):
    data = png_bytes(size=(64, 64))
    path = write_zip(tmp_path / "images.zip", {"cut.png": data[: len(data) - 20]})
    with ZipImageSource(path) as source, pytest.raises(ImageSourceError, match="not a readable"):
        source.read("cut.png")


def test_image_with_too_many_pixels_is_refused_before_decoding(tmp_path):
    limits = ImageLimits(max_pixels=15)
    path = write_zip(tmp_path / "images.zip", {"a.png": png_bytes(size=(4, 4))})
    with ZipImageSource(path, limits) as source, pytest.raises(ImageSourceError) as info:
        source.check_header("a.png")
    assert "decompression bomb (4×4 pixels, more than the 15 allowed)" in str(info.value)


def test_pillow_decompression_bomb_is_refused_with_the_default_limits():
    bomb = png_header_only(100_000, 100_000)  # 10^10 pixels in under 100 bytes
    assert len(bomb) < 100
    with pytest.raises(ImageSourceError, match=r"^zip: entry 'x\.png': refused as a decompression"):
        image_check("zip: entry 'x.png'", io.BytesIO(bomb), ImageLimits(), verify=False)


def test_pillow_bomb_warning_zone_is_refused_too():
    # Between Pillow's limit and twice it, Pillow only warns; the import refuses.
    side = int((Image.MAX_IMAGE_PIXELS * 1.5) ** 0.5)
    loose = ImageLimits(max_pixels=10**12)
    with pytest.raises(ImageSourceError, match="decompression bomb"):
        image_check("x", io.BytesIO(png_header_only(side, side)), loose, verify=False)


def test_formats_outside_the_allowed_list_are_not_parsed():
    out = io.BytesIO()
    Image.new("RGB", (4, 4)).save(out, format="PPM")  # Pillow reads PPM, imports do not
    with pytest.raises(ImageSourceError, match=r"not a readable image \(not one of JPEG, PNG"):
        image_check("x.ppm", io.BytesIO(out.getvalue()), ImageLimits(), verify=True)


# --- opening by specification -------------------------------------------------------------------


def test_image_source_open_picks_folder_zip_or_s3(tmp_path):
    zip_path = write_zip(tmp_path / "images.zip", GOOD)
    assert isinstance(image_source_open(tmp_path), FolderImageSource)
    with image_source_open(str(zip_path)) as source:
        assert isinstance(source, ZipImageSource)
    s3 = image_source_open("s3://bucket-1/coco/val2014", endpoint_url="http://127.0.0.1:9")
    assert isinstance(s3, S3ImageSource)
    assert (s3.bucket, s3.prefix, s3.label) == (
        "bucket-1",
        "coco/val2014/",
        "s3://bucket-1/coco/val2014/",
    )
    with pytest.raises(ImageSourceError, match="no such folder or zip file"):
        image_source_open(tmp_path / "missing")


@pytest.mark.parametrize("uri", ["s3://", "s3://B/x", "s3://a/x", "http://bucket/x", "s3:/bucket"])
def test_malformed_s3_locations_are_refused(uri):
    with pytest.raises(ImageSourceError, match="not an S3 location"):
        s3_uri_parse(uri)


def test_s3_location_without_prefix_lists_the_whole_bucket():
    assert s3_uri_parse("s3://my.bucket") == ("my.bucket", "")
    assert s3_uri_parse("s3://my-bucket/a/b/") == ("my-bucket", "a/b/")
