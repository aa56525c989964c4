from django.db import migrations, models

ENTITY_HELP = (
    "Aggregate level: labels naming one machine, device or process (any case), besides the known ones "
    "(node, hostname, instance, gpu, uuid, …); empty: detected as the labels whose values are (nearly) "
    "unique per series."
)
EXPOSED_HELP = (
    "Aggregate level: labels (not naming an entity) the grantee may group by, match on and see values of "
    "in fleet figures; empty: none."
)


class Migration(migrations.Migration):
    dependencies = [
        ("orgs", "0004_discoverability"),
    ]

    operations = [
        migrations.AddField(
            model_name="grant",
            name="entity_labels",
            field=models.JSONField(blank=True, default=list, help_text=ENTITY_HELP),
        ),
        migrations.AddField(
            model_name="grant",
            name="exposed_labels",
            field=models.JSONField(blank=True, default=list, help_text=EXPOSED_HELP),
        ),
    ]
