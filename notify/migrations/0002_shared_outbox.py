"""Email on the outbox under the channels (agents.delivery): its columns take the shared
names (renamed, no row lost), a lock token in place of the queued time, and an attempt log."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("notify", "0001_email"),
    ]

    operations = [
        # The unsent emails' index names the column renamed below: made again on its new name.
        migrations.RemoveIndex(model_name="email", name="email_unsent_idx"),
        migrations.RenameField("cursor", "last_event_id", "position"),
        migrations.RenameField("email", "next_try_at", "next_attempt_at"),
        migrations.AlterField(
            model_name="email",
            name="next_attempt_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.RenameField("email", "claimed_until", "locked_until"),
        migrations.RenameField("email", "sent_at", "finished_at"),
        migrations.AddField(
            model_name="email",
            name="lock_token",
            field=models.CharField(blank=True, max_length=32),
        ),
        migrations.RemoveField(model_name="email", name="enqueued_at"),
        migrations.CreateModel(
            name="EmailAttempt",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("number", models.PositiveIntegerField()),
                ("started_at", models.DateTimeField()),
                ("succeeded", models.BooleanField(default=False)),
                ("error", models.TextField(blank=True)),
                (
                    "email",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="attempt_log",
                        to="notify.email",
                    ),
                ),
            ],
            options={"ordering": ["id"]},
        ),
        migrations.AddIndex(
            model_name="email",
            index=models.Index(
                condition=models.Q(("status", "pending")),
                fields=["next_attempt_at"],
                name="email_unsent_idx",
            ),
        ),
    ]
