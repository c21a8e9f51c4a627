"""Set-up shared by the browser tests of a batch for people: a small dataset with two
machine annotators, and the wizard filled for a small batch with two assignments per HIT."""

from __future__ import annotations

from pathlib import Path

from annotation.imports.datasets import dataset_import_tsv
from annotation.models import Dataset
from mitl.synthetic.files import write
from mitl.synthetic.generation import generate
from pipeline.annotators import annotator_create


def shapes_dataset(tmp_path: Path) -> Dataset:
    """Import 30 synthetic images as `shapes` and create two bag-of-words annotators."""
    folder = tmp_path / "shapes"
    write(generate(n_images=30, seed=11), folder)
    dataset = dataset_import_tsv(
        name="shapes", captions_path=folder / "captions.tsv", images_dir=folder / "images"
    )
    for name, config in (("tfidf", {}), ("bow-plain", {"stop_words": False})):
        annotator_create(name=name, kind="bow", config=config)
    return dataset


def wizard_fill(page, dataset: Dataset, *, name: str, queries: int, k: int) -> None:
    """Fill the wizard for a small batch: both annotators, 8 pairs and 2 assignments per
    HIT at $0.25, golden negatives from depth 10 (the dataset is small). Does not create."""
    page.goto(f"/batches/new/?dataset={dataset.pk}")
    page.get_by_label("Name", exact=True).fill(name)
    page.get_by_label("tfidf (bow v1)").check()
    page.get_by_label("bow-plain (bow v1)").check()
    for label, value in {
        "Image queries": str(queries),
        "Caption queries": str(queries),
        "k": str(k),
        "Pairs to judge per HIT": "8",
        "Assignments per HIT": "2",
        "Reward per assignment ($)": "0.25",
    }.items():
        page.get_by_label(label, exact=True).fill(value)
    page.locator("summary", has_text="More settings").click()
    page.get_by_label("Golden negative depth", exact=True).fill("10")
