"""Evaluation jobs keep their checked rankings as the JSON bytes that came, not a JSON column."""

import json

from django.db import migrations, models


def rankings_to_bytes(apps, schema_editor):
    """Carry the rankings of jobs not yet run over into the new column."""
    job_model = apps.get_model("annotation", "EvaluationJob")
    for job in job_model.objects.exclude(rankings=None).only("pk", "rankings").iterator():
        job_model.objects.filter(pk=job.pk).update(
            rankings_json=json.dumps(job.rankings).encode()
        )


def rankings_from_bytes(apps, schema_editor):
    job_model = apps.get_model("annotation", "EvaluationJob")
    for job in job_model.objects.exclude(rankings_json=None).only("pk", "rankings_json").iterator():
        job_model.objects.filter(pk=job.pk).update(rankings=json.loads(bytes(job.rankings_json)))


class Migration(migrations.Migration):
    dependencies = [("annotation", "0018_batch_paused")]

    operations = [
        migrations.AddField(
            model_name="evaluationjob",
            name="rankings_json",
            field=models.BinaryField(
                blank=True,
                help_text="The checked rankings as JSON, until the job has run.",
                null=True,
            ),
        ),
        migrations.RunPython(rankings_to_bytes, rankings_from_bytes),
        migrations.RemoveField(model_name="evaluationjob", name="rankings"),
    ]
