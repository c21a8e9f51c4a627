"""The MTurk commands: publish (cost first), sync (report, bonuses), export and import."""

from __future__ import annotations

import csv
import io
from decimal import Decimal

import pytest
from django.core.management import CommandError, call_command

from annotation.models import Assignment

from .helpers import (
    GROUP_ID,
    accept_and_submit,
    expect_create_hit,
    expect_hit_type,
    expect_listing,
    hits_of,
    listed,
    publish,
    results_from_export,
    with_row,
)

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


@pytest.fixture
def default_client(client, stub, monkeypatch):
    """Hand the stubbed client to services called without `client=` (the commands)."""
    monkeypatch.setattr("annotation.mturk.client.mturk_client", lambda **kwargs: client)
    return client


def test_the_publish_command_prints_the_cost_then_publishes(annotating_batch, default_client, stub):
    hits = hits_of(annotating_batch)
    out = run("mturk_publish", str(annotating_batch.pk), "--estimate-only")
    assignments = len(hits) * 2
    assert out == (
        f"batch {annotating_batch.pk}: {len(hits)} HITs × 2 assignments at $0.50 = "
        f"${Decimal('0.50') * assignments} + MTurk commission ${Decimal('0.10') * assignments} "
        f"(20%) = ${Decimal('0.60') * assignments}\n"
    )
    expect_hit_type(stub)
    for hit in hits:
        expect_create_hit(stub, annotating_batch, hit)
    out = run("mturk_publish", str(annotating_batch.pk))
    stub.assert_no_pending_responses()
    assert f"published on the sandbox: {len(hits)} HITs now, 0 before" in out
    assert (
        f"workers see them at https://workersandbox.mturk.com/mturk/preview?groupId={GROUP_ID}"
        in out
    )


def test_the_publish_command_turns_refusals_into_clear_errors(
    annotating_batch, small_config, default_client, monkeypatch
):
    from pipeline.stages import batch_create

    draft = batch_create(dataset=annotating_batch.dataset, name="draft", raw_config=small_config)
    with pytest.raises(CommandError, match="is draft: only a batch in the annotating state"):
        run("mturk_publish", str(draft.pk))
    with pytest.raises(CommandError, match="no batch 999999"):
        run("mturk_publish", "999999")
    with pytest.raises(CommandError, match="--hit-settings is not JSON"):
        run("mturk_publish", str(annotating_batch.pk), "--hit-settings", "{reward: 1}")
    with pytest.raises(CommandError, match=r"at least \$0.01"):
        run("mturk_publish", str(annotating_batch.pk), "--hit-settings", '{"reward": "0"}')
    monkeypatch.setattr("builtins.input", lambda prompt: "no")
    with pytest.raises(CommandError, match="not published"):
        run("mturk_publish", str(annotating_batch.pk), "--production")


def test_the_sync_command_reports_and_pays_bonuses(annotating_batch, client, stub, default_client):
    h0, *rest = publish(annotating_batch, client, stub)
    accept_and_submit(h0, "A1W1", "3A01")
    expect_listing(
        stub, h0, listed(h0, ("3A01", "A1W1", "Submitted"), ("3A09", "A1W9", "Submitted"))
    )
    stub.add_response("approve_assignment", {}, {"AssignmentId": "3A01"})
    for hit in rest:
        expect_listing(stub, hit, [])
    stub.add_response("send_bonus", {}, None)
    out = run("mturk_sync", str(annotating_batch.pk), "--bonus", "3A01", "0.10", "--reason", "Fast")
    stub.assert_no_pending_responses()
    assert "approved on MTurk: 1, rejected: 0, re-posted: 0, waiting for review here: 0" in out
    assert "MISSING 3A09: submitted on MTurk, but its answers never reached the platform" in out
    assert "bonus $0.10 for 3A01: sent" in out


def test_the_offline_commands_export_and_import_with_file_and_line_errors(
    annotating_batch, tmp_path
):
    out = run("mturk_export", str(annotating_batch.pk), "--out", str(tmp_path))
    hits = len(hits_of(annotating_batch))
    input_csv = tmp_path / f"batch-{annotating_batch.pk}-input.csv"
    assert out.startswith(f"{hits} HITs → {input_csv}")
    assert "<crowd-form>" in (tmp_path / f"batch-{annotating_batch.pk}-layout.html").read_text()
    text = results_from_export(input_csv.read_text(), [("3HITOFF0", "3AOFF0", "A1OFF1", False)])
    results = tmp_path / "results.csv"
    results.write_text(with_row(text, {"Input.hit_id": "999999", "AssignmentId": "3AOFF9"}))
    decisions = tmp_path / "decisions.csv"
    with pytest.raises(CommandError) as refusal:
        run(
            "mturk_import_results",
            str(annotating_batch.pk),
            str(results),
            "--decisions",
            str(decisions),
        )
    assert str(refusal.value) == (
        f"1 rows not imported:\n{results}:3: HIT 999999 is not a HIT of batch {annotating_batch.pk}"
    )
    rows = {row["AssignmentId"]: row for row in csv.DictReader(io.StringIO(decisions.read_text()))}
    assert rows["3AOFF0"]["Approve"] == "x"
    assert Assignment.objects.get(external_id="3AOFF0").status == "approved"
