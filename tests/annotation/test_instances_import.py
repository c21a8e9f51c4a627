"""Object instances from COCO `instances_*.json`: the parser, the service and the commands.

A bad file raises ImportFileError naming the file, line and field; a refused import
changes no image.
"""

from __future__ import annotations

import json
from collections import Counter
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from annotation.errors import ServiceError
from annotation.imports.instances import InstancesImported, instances_import
from annotation.models import Caption, Dataset, Image
from mitl.explain.concepts import instances_concepts
from mitl.formats.common import ImportFileError
from mitl.formats.instances import parse_coco_instances
from mitl.synthetic.files import INSTANCES_FILE, write
from mitl.synthetic.generation import generate

pytestmark = pytest.mark.django_db


def coco(**overrides) -> dict:
    """A COCO instances document: images 1 (100 x 50) and 2 (10 x 10), two categories."""
    doc = {
        "info": {"description": "test"},
        "images": [
            {"id": 1, "width": 100, "height": 50, "file_name": "a.png"},
            {"id": 2, "width": 10, "height": 10, "file_name": "b.png"},
        ],
        "categories": [{"id": 1, "name": "Dog"}, {"id": 18, "name": "cat"}],
        "annotations": [
            {"id": 7, "image_id": 1, "category_id": 1, "bbox": [10, 5, 20, 25], "iscrowd": 0},
            {
                "id": 8,
                "image_id": 1,
                "category_id": 18,
                "bbox": [0, 0, 50.5, 10],
                "attributes": ["Red", "small"],
            },
            {"id": 9, "image_id": 1, "category_id": 1, "bbox": [0, 0, 100, 50], "iscrowd": 1},
            {"id": 10, "image_id": 2, "category_id": 18, "bbox": [-2, -2, 14, 14]},
        ],
    }
    doc.update(overrides)
    return doc


def write_json(path: Path, doc: object) -> Path:
    path.write_text(json.dumps(doc, indent=1), encoding="utf-8")
    return path


def annotation(**fields) -> dict:
    return {"id": 1, "image_id": 1, "category_id": 1, "bbox": [0, 0, 1, 1], **fields}


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


@pytest.fixture
def shapes() -> Dataset:
    """Images 1, 2 and 3 with one caption each; image 3 already has an instance."""
    dataset = Dataset.objects.create(name="shapes")
    for ext_id in (1, 2, 3):
        instances = [{"category": "old", "area": 0.5}] if ext_id == 3 else []
        image = Image.objects.create(dataset=dataset, ext_id=ext_id, instances=instances)
        Caption.objects.create(dataset=dataset, ext_id=10 + ext_id, image=image, text="x")
    return dataset


def instances_of(dataset: Dataset) -> dict[int, list]:
    return dict(dataset.images.values_list("ext_id", "instances"))


# --- the parser ----------------------------------------------------------------------------


def test_parser_reads_boxes_as_area_fractions_with_categories_and_attributes(tmp_path):
    parsed = parse_coco_instances(write_json(tmp_path / "instances.json", coco()))

    assert parsed == {
        1: [
            {"category": "dog", "area": 0.1, "bbox": [10.0, 5.0, 20.0, 25.0], "attributes": []},
            {
                "category": "cat",
                "area": 50.5 * 10 / 5000,
                "bbox": [0.0, 0.0, 50.5, 10.0],
                "attributes": ["red", "small"],
            },
        ],
        2: [{"category": "cat", "area": 1.0, "bbox": [-2.0, -2.0, 14.0, 14.0], "attributes": []}],
    }
    # the crowd box (id 9) is left out; a box larger than the image is clipped to area 1
    concepts = instances_concepts(1, parsed[1])
    assert concepts.counts == {"dog": 1, "cat": 1} and concepts.has_boxes


def test_parser_keeps_images_without_instances_as_empty_lists(tmp_path):
    doc = coco(annotations=[annotation(image_id=2)])
    assert parse_coco_instances(write_json(tmp_path / "i.json", doc))[1] == []


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ([], "must be a JSON object, got a list"),
        (coco(images=[]), "field images: holds no image"),
        (coco(annotations=[]), "field annotations: holds no annotation"),
        (
            {k: v for k, v in coco().items() if k != "categories"},
            "field categories: is missing; an instances file",
        ),
        (coco(images=[{"id": 1, "width": 4}]), "field images[0].height: is missing"),
        (coco(images=[{"id": 1, "width": 0, "height": 4}]), "images[0].width: must be positive"),
        (
            coco(images=[{"id": 1, "width": "4", "height": 4}]),
            "images[0].width: must be a finite number, got '4'",
        ),
        (
            coco(images=[{"id": 1, "width": 4, "height": 4}, {"id": 1, "width": 4, "height": 4}]),
            "field images[1].id: image id 1 repeats images[0]",
        ),
        (coco(images=[{"id": -1, "width": 4, "height": 4}]), "must not be negative"),
        (coco(categories=[{"id": 1}]), "field categories[0].name: must be a string, got nothing"),
        (
            coco(categories=[{"id": 1, "name": "a"}, {"id": 1, "name": "b"}]),
            "field categories[1].id: category id 1 repeats categories[0]",
        ),
        (
            coco(annotations=[annotation(image_id=5)]),
            "field annotations[0].image_id: image id 5 is not in images",
        ),
        (
            coco(annotations=[annotation(category_id=2)]),
            "field annotations[0].category_id: category id 2 is not in categories",
        ),
        (
            coco(annotations=[annotation(bbox=[1, 2, 3])]),
            "field annotations[0].bbox: must be a list [x, y, width, height], got [1, 2, 3]",
        ),
        (
            coco(annotations=[{"image_id": 1, "category_id": 1}]),
            "field annotations[0].bbox: must be a list [x, y, width, height], got nothing",
        ),
        (
            coco(annotations=[annotation(bbox=[0, 0, "3", 4])]),
            "field annotations[0].bbox[2]: must be a finite number",
        ),
        (
            coco(annotations=[annotation(bbox=[0, 0, -3, 4])]),
            "width and height must not be negative",
        ),
        (
            coco(annotations=[annotation(attributes="red")]),
            "field annotations[0].attributes: must be a list of words",
        ),
        (
            coco(annotations=[annotation(iscrowd=2)]),
            "field annotations[0].iscrowd: must be 0 or 1, got 2",
        ),
    ],
)
def test_parser_refuses_a_malformed_file_naming_the_field(tmp_path, doc, message):
    path = write_json(tmp_path / "instances.json", doc)
    with pytest.raises(ImportFileError, match=str(path)) as error:
        parse_coco_instances(path)
    assert message in str(error.value)


def test_parser_names_the_line_of_the_bad_field(tmp_path):
    path = write_json(tmp_path / "instances.json", coco(annotations=[annotation(category_id=2)]))
    with pytest.raises(ImportFileError) as error:
        parse_coco_instances(path)
    line = next(
        n for n, text in enumerate(path.read_text().splitlines(), 1) if '"category_id": 2' in text
    )
    assert str(error.value).startswith(f"{path}:{line}: ")


def test_parser_refuses_nan_and_unreadable_files(tmp_path):
    nan = tmp_path / "nan.json"
    nan.write_text(json.dumps(coco()).replace("[10, 5, 20, 25]", "[10, 5, NaN, 25]"))
    with pytest.raises(ImportFileError, match=r"bbox\[2\]: must be a finite number, got nan"):
        parse_coco_instances(nan)
    broken = tmp_path / "broken.json"
    broken.write_text('{"images": [\n')
    with pytest.raises(ImportFileError, match="invalid JSON"):
        parse_coco_instances(broken)
    with pytest.raises(ImportFileError, match="cannot open"):
        parse_coco_instances(tmp_path / "missing.json")


# --- the service ---------------------------------------------------------------------------


def test_import_replaces_the_listed_images_and_keeps_the_others(shapes, tmp_path):
    result = instances_import(dataset=shapes, path=write_json(tmp_path / "i.json", coco()))

    # Image 3 is not in the file: it keeps its instance, and the result counts it.
    assert result == InstancesImported(images=2, instances=3, unlisted_images=1)
    stored = instances_of(shapes)
    assert [row["category"] for row in stored[1]] == ["dog", "cat"]
    assert stored[2][0]["area"] == 1.0
    assert stored[3] == [{"category": "old", "area": 0.5}]  # not in the file: kept


def test_unknown_image_ids_are_refused_and_nothing_is_written(shapes, tmp_path):
    doc = coco()
    doc["images"] += [{"id": i, "width": 4, "height": 4} for i in range(100, 107)]
    doc["annotations"].append(annotation(image_id=100))
    path = write_json(tmp_path / "i.json", doc)
    before = instances_of(shapes)

    with pytest.raises(ServiceError) as error:
        instances_import(dataset=shapes, path=path)

    assert str(error.value) == (
        f"{path}: 7 of its 9 image ids are not in dataset 'shapes' "
        "(100, 101, 102, 103, 104, …); --ignore-unknown drops them"
    )
    assert instances_of(shapes) == before


def test_ignore_unknown_drops_and_counts_the_unknown_images(shapes, tmp_path):
    doc = coco()
    doc["images"] += [{"id": 100, "width": 4, "height": 4}, {"id": 101, "width": 4, "height": 4}]
    doc["annotations"] += [annotation(image_id=100), annotation(image_id=100)]
    path = write_json(tmp_path / "i.json", doc)

    result = instances_import(dataset=shapes, path=path, ignore_unknown=True)

    assert result == InstancesImported(
        images=2, instances=3, unknown_images=2, unknown_instances=2, unlisted_images=1
    )
    assert len(instances_of(shapes)[1]) == 2


def test_a_file_without_any_of_the_datasets_images_is_refused_even_when_ignoring(shapes, tmp_path):
    doc = coco(images=[{"id": 50, "width": 4, "height": 4}], annotations=[annotation(image_id=50)])
    with pytest.raises(ServiceError, match="none of its 1 image ids are in dataset 'shapes'"):
        instances_import(
            dataset=shapes, path=write_json(tmp_path / "i.json", doc), ignore_unknown=True
        )


def test_a_bad_file_changes_nothing(shapes, tmp_path):
    before = instances_of(shapes)
    bad = coco(annotations=[annotation(), annotation(bbox=None)])
    with pytest.raises(ImportFileError):
        instances_import(dataset=shapes, path=write_json(tmp_path / "i.json", bad))
    assert instances_of(shapes) == before


# --- import_instances ----------------------------------------------------------------------


def test_import_instances_prints_a_one_line_summary(shapes, tmp_path):
    doc = coco()
    doc["images"].append({"id": 100, "width": 4, "height": 4})
    doc["annotations"].append(annotation(image_id=100))
    path = write_json(tmp_path / "i.json", doc)

    out = run("import_instances", "shapes", "--instances", str(path), "--ignore-unknown")

    assert out == (
        "imported 3 instances on 2 images of 'shapes'; dropped 1 images unknown to the "
        "dataset (1 instances); 1 images of the dataset are not in the file: they keep their "
        "instances, and count as showing no object if they never had any\n"
    )


def test_import_instances_without_unknown_ids_says_nothing_was_dropped(shapes, tmp_path):
    path = write_json(tmp_path / "i.json", coco())
    out = run("import_instances", "shapes", "--instances", str(path))
    assert out == (
        "imported 3 instances on 2 images of 'shapes'; 1 images of the dataset are not in the "
        "file: they keep their instances, and count as showing no object if they never had any\n"
    )


@pytest.mark.parametrize(
    ("name", "file_text", "message"),
    [
        ("nope", "{}", "no dataset named 'nope'"),
        ("shapes", None, "cannot open"),
        ("shapes", '{"images": [', "invalid JSON"),
        ("shapes", json.dumps(coco(images=[])), "field images: holds no image"),
    ],
)
def test_import_instances_refuses_clearly(shapes, tmp_path, name, file_text, message):
    path = tmp_path / "instances.json"
    if file_text is not None:
        path.write_text(file_text)
    with pytest.raises(CommandError, match=message):
        run("import_instances", name, "--instances", str(path))


def test_import_instances_refuses_unknown_ids_without_the_flag(shapes, tmp_path):
    doc = coco()
    doc["images"].append({"id": 100, "width": 4, "height": 4})
    path = write_json(tmp_path / "i.json", doc)
    with pytest.raises(CommandError, match=r"1 of its 3 image ids .* \(100\); --ignore-unknown"):
        run("import_instances", "shapes", "--instances", str(path))


def test_import_instances_needs_the_instances_option(shapes):
    with pytest.raises(CommandError, match="--instances"):
        run("import_instances", "shapes")


# --- import_dataset --instances ------------------------------------------------------------


def write_captions(path: Path, image_ids: list[int]) -> Path:
    rows = ["caption_id\timage_id\tfile_name\tcaption"]
    rows += [f"{10 + i}\t{i}\t{i}.png\tA caption of image {i}." for i in image_ids]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def test_import_dataset_stores_the_instances_in_the_same_import(tmp_path):
    captions = write_captions(tmp_path / "captions.tsv", [1, 2, 3])
    path = write_json(tmp_path / "i.json", coco())

    out = run("import_dataset", "boxes", "--captions", str(captions), "--instances", str(path))

    assert out == "imported dataset 'boxes': 3 images, 3 captions, 3 object instances\n"
    stored = instances_of(Dataset.objects.get(name="boxes"))
    assert len(stored[1]) == 2 and len(stored[2]) == 1 and stored[3] == []


def test_import_dataset_refuses_instances_of_images_without_captions(tmp_path):
    captions = write_captions(tmp_path / "captions.tsv", [1])
    path = write_json(tmp_path / "i.json", coco())
    with pytest.raises(CommandError, match=r"1 of its 2 image ids are not among .* \(2\)"):
        run("import_dataset", "boxes", "--captions", str(captions), "--instances", str(path))
    assert not Dataset.objects.exists() and not Image.objects.exists()


def test_import_dataset_with_a_bad_instances_file_leaves_nothing(tmp_path):
    captions = write_captions(tmp_path / "captions.tsv", [1, 2])
    path = write_json(tmp_path / "i.json", coco(annotations=[annotation(bbox="box")]))
    with pytest.raises(CommandError, match=r"annotations\[0\]\.bbox"):
        run("import_dataset", "boxes", "--captions", str(captions), "--instances", str(path))
    assert not Dataset.objects.exists()


def test_the_synthetic_instances_json_imports_with_the_scenes_objects(tmp_path):
    generated = generate(n_images=8, seed=4)
    write(generated, tmp_path, image_size=64, with_images=False)

    run(
        "import_dataset",
        "synthetic",
        "--captions",
        str(tmp_path / "captions.tsv"),
        "--instances",
        str(tmp_path / INSTANCES_FILE),
    )

    stored = instances_of(Dataset.objects.get(name="synthetic"))
    for scene in generated.scenes:
        concepts = instances_concepts(scene.image_id, stored[scene.image_id])
        expected = Counter()
        for group in scene.groups:
            expected[group.shape] += group.count
        assert concepts.counts == expected and concepts.has_boxes
        assert {o.attributes for o in concepts.objects} == {
            (group.color, group.size) for group in scene.groups
        }
