import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("orgs", "0003_audit_coalesced"),
        ("timeline", "0010_topology"),
    ]

    operations = [
        migrations.CreateModel(
            name="Investigation",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "window_start",
                    models.BigIntegerField(help_text="µs since epoch, UTC: the window investigated"),
                ),
                ("window_end", models.BigIntegerField(help_text="µs since epoch, UTC")),
                ("findings", models.JSONField(blank=True, default=list)),
                (
                    "baseline",
                    models.JSONField(blank=True, default=dict, help_text="the baseline used, and why"),
                ),
                ("computed_at", models.DateTimeField()),
                ("compute_ms", models.FloatField(default=0.0)),
                (
                    "incident",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="investigations",
                        to="timeline.incident",
                    ),
                ),
                (
                    "org",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="investigations",
                        to="orgs.organization",
                    ),
                ),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(fields=("incident", "org"), name="investigation_per_incident_org")
                ],
            },
        ),
    ]
