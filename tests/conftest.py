"""Shared fixtures: isolated media/release folders, a small synthetic dataset, annotators."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from mitl.synthetic.files import write
from mitl.synthetic.generation import generate

SMALL_IMAGES = 40


@pytest.fixture(autouse=True)
def _isolated_storage(settings, tmp_path: Path) -> None:
    """Keep media and releases of every test inside its own temporary folder."""
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.RELEASES_DIR = tmp_path / "releases"
    settings.RELEVANCE_CACHE_DIR = tmp_path / "relevance"
    settings.REPORTS_CACHE_DIR = tmp_path / "reports-cache"


@pytest.fixture(autouse=True)
def _fresh_cache(settings) -> None:
    """Give every test an empty local-memory cache: login attempt counts never carry over."""
    from django.core.cache import cache

    # Never the cache of CACHE_URL: clearing it would flush a Redis database.
    settings.CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "t"}
    }
    cache.clear()


@pytest.fixture(scope="session")
def synthetic_files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small synthetic dataset written to disk once per session (TSV, PNGs, labels)."""
    out = tmp_path_factory.mktemp("synthetic")
    write(generate(n_images=SMALL_IMAGES, seed=7), out)
    return out


@pytest.fixture
def dataset(db, synthetic_files: Path):
    """The small synthetic dataset imported through the real import service."""
    from annotation.imports.datasets import dataset_import_tsv

    return dataset_import_tsv(
        name="small",
        captions_path=synthetic_files / "captions.tsv",
        images_dir=synthetic_files / "images",
        labels_path=synthetic_files / "labels.json",
        meta={"synthetic": json.loads((synthetic_files / "synthetic.json").read_text())},
    )


@pytest.fixture
def annotators(db):
    """Two bag-of-words annotators with different settings."""
    from pipeline.annotators import annotator_create

    return [
        annotator_create(name="tfidf", kind="bow", config={}),
        annotator_create(name="bow-plain", kind="bow", config={"stop_words": False}),
    ]


@pytest.fixture
def small_config() -> dict:
    return {
        "annotators": ["tfidf", "bow-plain"],
        "n_image_queries": 8,
        "n_caption_queries": 8,
        "k": 3,
        "golden_negative_depth": 10,
        "hit_size": 8,
        "assignments_per_hit": 2,
        "seed": 1,
    }


@pytest.fixture
def batch(dataset, annotators, small_config):
    """A draft batch on the small dataset."""
    from pipeline.stages import batch_create

    return batch_create(dataset=dataset, name="small batch", raw_config=small_config)


@pytest.fixture
def eager_celery():
    """Run Celery tasks in this process even when the environment names a broker."""
    from config.celery import app

    overrides = {"CELERY_TASK_ALWAYS_EAGER": True, "CELERY_TASK_EAGER_PROPAGATES": True}
    saved = {key: app.conf[key] for key in overrides}
    app.conf.update(overrides)
    yield
    app.conf.update(saved)


def services_available() -> tuple[bool, str]:
    """Say whether PostgreSQL (via DATABASE_URL) and Redis answer."""
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        return False, "DATABASE_URL does not point at PostgreSQL"
    try:
        import redis

        redis.Redis.from_url(os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/15")).ping()
    except Exception as exc:
        return False, f"Redis does not answer ({exc})"
    return True, ""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip `services` tests without the services, unless REQUIRE_SERVICES=1 demands them."""
    marked = [item for item in items if "services" in item.keywords]
    if not marked:
        return
    available, reason = services_available()
    if available:
        return
    if os.environ.get("REQUIRE_SERVICES") == "1":
        raise pytest.UsageError(f"REQUIRE_SERVICES=1 but the services are missing: {reason}")
    for item in marked:
        item.add_marker(pytest.mark.skip(reason=f"services missing: {reason}"))


@pytest.fixture
def annotating_batch(batch):
    """The small batch run through retrieval, pooling and HIT building, ready for people."""
    from pipeline.stages import batch_run_until

    assert batch_run_until(batch_id=batch.pk, until="annotating") == "annotating"
    batch.refresh_from_db()
    return batch


@pytest.fixture
def mturk_api(monkeypatch):
    """The real boto3 MTurk client behind a Stubber, handed to every service that asks
    `annotation.mturk.client` for one: requests are checked against the service model."""
    import boto3
    from botocore.stub import Stubber

    from annotation.mturk.protocol import SANDBOX_ENDPOINT

    api = boto3.client(
        "mturk",
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        endpoint_url=SANDBOX_ENDPOINT,
    )
    monkeypatch.setattr("annotation.mturk.client.mturk_client", lambda **kwargs: api)
    with Stubber(api) as stub:
        yield stub
