import django.db.models.deletion
from django.db import migrations, models

SIGNALS = [
    ("application", "application"),
    ("scheduler", "scheduler"),
    ("network", "network"),
    ("storage", "storage"),
    ("gpu", "gpu"),
    ("host", "host"),
    ("other", "other"),
]


class Migration(migrations.Migration):
    dependencies = [
        ("orgs", "0003_audit_coalesced"),
        ("timeline", "0009_incident_invitations"),
    ]

    operations = [
        migrations.CreateModel(
            name="TopologyEdge",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("source", models.CharField(max_length=200)),
                ("signal", models.CharField(choices=SIGNALS, default="other", max_length=16)),
                ("dependent_kind", models.CharField(max_length=64)),
                ("dependent", models.CharField(max_length=200)),
                ("dependency_kind", models.CharField(max_length=64)),
                ("dependency", models.CharField(max_length=200)),
                ("pushed_at", models.DateTimeField(auto_now=True)),
                (
                    "org",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="+", to="orgs.organization"
                    ),
                ),
            ],
            options={
                "indexes": [models.Index(fields=["org", "signal"], name="timeline_to_org_id_f5c4d7_idx")],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("org", "source", "dependent_kind", "dependent", "dependency_kind", "dependency"),
                        name="topology_edge_identity",
                    )
                ],
            },
        ),
        migrations.CreateModel(
            name="TopologyEntity",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("source", models.CharField(max_length=200)),
                ("signal", models.CharField(choices=SIGNALS, default="other", max_length=16)),
                ("kind", models.CharField(max_length=64)),
                ("name", models.CharField(max_length=200)),
                ("series_patterns", models.JSONField(default=list)),
                (
                    "org",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="+", to="orgs.organization"
                    ),
                ),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(fields=("org", "source", "kind", "name"), name="topology_entity_identity")
                ],
            },
        ),
    ]
