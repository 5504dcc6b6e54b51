"""The reviewer pages."""

from django.urls import path

from approvals import account, audit, edits, fragments, grants_page, inbox, stepup, views

urlpatterns = [
    path("", inbox.inbox, name="inbox"),
    path("threads/<str:thread_id>/", views.thread_page, name="thread"),
    # Pieces of the pages, asked for by the pages when an event concerns them (issue 26).
    path("fragments/inbox/counts", inbox.counts_fragment, name="fragment_counts"),
    path(
        "fragments/suspensions/<str:suspension_id>/card",
        fragments.card_fragment,
        name="fragment_card",
    ),
    path(
        "fragments/suspensions/<str:suspension_id>/review",
        edits.review_fragment,
        name="fragment_review",
    ),
    path(
        "fragments/suspensions/<str:suspension_id>/form",
        edits.form_fragment,
        name="fragment_form",
    ),
    path(
        "fragments/suspensions/<str:suspension_id>/grant",
        edits.grant_fragment,
        name="fragment_grant",
    ),
    path(
        "fragments/threads/<str:thread_id>/entries",
        fragments.entries_fragment,
        name="fragment_entries",
    ),
    path("fragments/threads/<str:thread_id>/reply", inbox.reply_fragment, name="fragment_reply"),
    path(
        "fragments/threads/<str:thread_id>/history",
        fragments.history_fragment,
        name="fragment_history",
    ),
    path(
        "fragments/threads/<str:thread_id>/batch", fragments.batch_fragment, name="fragment_batch"
    ),
    path(
        "fragments/threads/<str:thread_id>/state",
        fragments.thread_head_fragment,
        name="fragment_thread_state",
    ),
    # A step_up request approved with a passkey on its page (approvals.stepup).
    path(
        "threads/<str:thread_id>/suspensions/<str:suspension_id>/step-up/options",
        stepup.options,
        name="step_up_options",
    ),
    path(
        "threads/<str:thread_id>/suspensions/<str:suspension_id>/step-up/resume",
        stepup.resume,
        name="step_up_resume",
    ),
    path("account/", account.account_page, name="account"),
    path("account/passkeys/options", account.registration_options, name="passkey_options"),
    path("account/passkeys", account.register, name="passkey_register"),
    path("account/passkeys/<int:passkey_id>/remove", account.remove, name="passkey_remove"),
    path("runs/new/", views.new_run, name="new_run"),
    path("grants/", grants_page.grants_page, name="grants"),
    path("grants/<str:grant_id>/revoke", grants_page.revoke, name="grant_revoke"),
    path("audit/", audit.audit_page, name="audit"),
    path("audit/export.csv", audit.export_csv, name="audit_csv"),
    path("audit/export.jsonl", audit.export_jsonl, name="audit_jsonl"),
    path("audit/events.csv", audit.trail_csv, name="audit_events_csv"),
    path("audit/events.jsonl", audit.trail_jsonl, name="audit_events_jsonl"),
    path("healthz", views.health, name="health"),
    # /login/ and /logout/: sso.urls (passwords, and the identity provider's sign-in).
]
