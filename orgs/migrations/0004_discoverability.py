import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("orgs", "0003_audit_coalesced"),
    ]

    operations = [
        migrations.AddField(
            model_name="organization",
            name="unshared_disclosure",
            field=models.CharField(
                choices=[
                    ("none", "that data exists, per signal"),
                    ("counts", "how many series exist, per signal"),
                    ("described", "the counts and the published descriptions"),
                ],
                default="counts",
                help_text=(
                    "What a placeholder says of data not shared with another organisation (when "
                    "announced): none (that some exists, per signal), counts (how many series), described "
                    "(the counts and the published descriptions). Never metric names or labels."
                ),
                max_length=10,
            ),
        ),
        migrations.CreateModel(
            name="UnsharedDescription",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "name",
                    models.CharField(
                        help_text="A name others read, e.g. 'metadata service health'.", max_length=80
                    ),
                ),
                ("text", models.CharField(blank=True, help_text="One sentence others read.", max_length=300)),
                (
                    "signals",
                    models.JSONField(
                        blank=True, default=list, help_text="Signal families; empty: all (private)."
                    ),
                ),
                (
                    "name_patterns",
                    models.JSONField(
                        blank=True,
                        default=list,
                        help_text="Glob patterns on metric names; empty: all (private).",
                    ),
                ),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("updated_at", models.DateTimeField(auto_now=True)),
                (
                    "created_by",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                (
                    "owner",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="unshared_descriptions",
                        to="orgs.organization",
                    ),
                ),
            ],
            options={
                "ordering": ["owner__slug", "name", "pk"],
                "constraints": [
                    models.UniqueConstraint(fields=("owner", "name"), name="unshared_description_name_unique")
                ],
            },
        ),
    ]
