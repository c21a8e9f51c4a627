"""Staged import uploads that no job needs are deleted once old: the hourly task, the command."""

from __future__ import annotations

import os
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command

from annotation.imports.jobs import import_job_create
from annotation.imports.staging import (
    import_staging_clean,
    import_staging_dir,
    import_staging_orphans,
    import_staging_root,
)
from annotation.models import ImportJob
from annotation.tasks import clean_import_staging

pytestmark = pytest.mark.django_db

DAY = timedelta(hours=24)
CAPTIONS = b"caption_id\timage_id\tfile_name\tcaption\n11\t1\ta.png\tA red square.\n"


@pytest.fixture(autouse=True)
def _isolated_var(settings, tmp_path: Path) -> None:
    settings.VAR_DIR = tmp_path / "var"


def age(path: Path, hours: float) -> None:
    """Make a path and everything in it last written `hours` ago."""
    then = time.time() - hours * 3600
    for entry in [*path.rglob("*"), path]:
        os.utime(entry, (then, then), follow_symlinks=False)


def staged(name: str, *, hours: float) -> Path:
    """A staging folder laid out as import_job_create leaves it, last written `hours` ago."""
    folder = import_staging_root() / name
    (folder / "captions").mkdir(parents=True)
    (folder / "captions" / "captions.tsv").write_bytes(CAPTIONS)
    age(folder, hours)
    return folder


def queued_job(django_capture_on_commit_callbacks) -> ImportJob:
    """A real job, staged and committed, whose task has not run yet."""
    with django_capture_on_commit_callbacks(execute=False):
        return import_job_create(
            kind="dataset",
            params={"name": "tiny"},
            uploads={"captions": SimpleUploadedFile("captions.tsv", CAPTIONS)},
        )


def test_the_upload_of_a_request_killed_mid_way_is_deleted_once_old():
    dead = staged(".new-0123abcd", hours=25)
    recent = staged(".new-4567ef01", hours=1)  # a request may still be checking it

    assert import_staging_clean(older_than=DAY) == [dead]
    assert not dead.exists() and recent.exists()


def test_a_folder_is_as_recent_as_its_last_written_file():
    folder = staged(".new-0123abcd", hours=25)
    age(folder / "captions" / "captions.tsv", 0)  # an upload still being written

    assert import_staging_clean(older_than=DAY) == []
    assert folder.exists()


def test_a_queued_or_running_job_keeps_its_uploads_however_old(
    django_capture_on_commit_callbacks,
):
    job = queued_job(django_capture_on_commit_callbacks)
    folder = import_staging_dir(job.pk)
    age(folder, 1000)

    assert import_staging_clean(older_than=DAY) == []
    ImportJob.objects.filter(pk=job.pk).update(status="running")
    assert import_staging_clean(older_than=DAY) == []
    assert folder.exists()


@pytest.mark.parametrize("status", ["done", "failed"])
def test_the_uploads_of_a_finished_job_are_deleted(django_capture_on_commit_callbacks, status):
    job = queued_job(django_capture_on_commit_callbacks)
    ImportJob.objects.filter(pk=job.pk).update(status=status, error="it failed")
    folder = import_staging_dir(job.pk)
    age(folder, 25)

    assert import_staging_clean(older_than=DAY) == [folder]
    assert not folder.exists()


def test_a_folder_whose_job_does_not_exist_is_deleted_once_old():
    gone = staged("4242", hours=25)
    just_renamed = staged("4243", hours=0)  # its job may not be committed yet

    assert import_staging_clean(older_than=DAY) == [gone]
    assert just_renamed.exists()


def test_anything_else_under_the_root_is_left_alone(tmp_path):
    other = staged("notes", hours=100)
    (import_staging_root() / "README").write_text("hands off")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep")
    link = import_staging_root() / ".new-link"
    link.symlink_to(outside, target_is_directory=True)
    age(outside, 100)

    assert import_staging_clean(older_than=DAY) == []
    assert other.exists() and (outside / "keep.txt").exists() and link.is_symlink()


def test_cleaning_again_deletes_nothing_and_no_root_is_nothing_to_do():
    assert import_staging_clean(older_than=DAY) == []  # var/imports/ does not exist yet
    staged(".new-0123abcd", hours=25)

    assert len(import_staging_clean(older_than=DAY)) == 1
    assert import_staging_clean(older_than=DAY) == []


def test_the_hourly_task_uses_the_age_setting(settings, eager_celery):
    settings.IMPORT_STAGING_MAX_AGE_HOURS = 48
    staged(".new-0123abcd", hours=25)
    staged(".new-4567ef01", hours=49)

    assert clean_import_staging.delay().get() == 1
    assert clean_import_staging.delay().get() == 0
    assert [p.name for p in import_staging_root().iterdir()] == [".new-0123abcd"]


def test_celery_beat_runs_the_clean_up_hourly():
    from config.celery import app

    app.loader.import_default_modules()
    entries = {entry["task"]: entry for entry in django_settings.CELERY_BEAT_SCHEDULE.values()}
    assert entries["annotation.clean_import_staging"]["schedule"] == 3600.0
    assert all(task in app.tasks for task in entries)  # every scheduled name is a real task


def test_the_command_lists_then_deletes(capsys):
    folder = staged(".new-0123abcd", hours=7)

    call_command("import_staging_clean", "--older-than-hours", "6", "--dry-run")
    assert f"would delete {folder}" in capsys.readouterr().out
    assert folder.exists()
    assert import_staging_orphans(older_than=timedelta(hours=6)) == [folder]

    call_command("import_staging_clean", "--older-than-hours", "6")
    out = capsys.readouterr().out
    assert f"deleted {folder}" in out and "deleted 1 staging folder(s)" in out
    assert not folder.exists()

    call_command("import_staging_clean")  # the default age (24 h): nothing left anyway
    assert "deleted 0 staging folder(s)" in capsys.readouterr().out


def test_the_command_refuses_an_age_that_would_take_uploads_in_progress():
    with pytest.raises(CommandError, match="more than 0"):
        call_command("import_staging_clean", "--older-than-hours", "0")
