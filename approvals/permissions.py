"""Who may do what: reviewers are a group with the engine's permissions."""

REVIEWERS = "reviewers"

REVIEWER_PERMISSIONS = [
    ("agents", "view_thread"),
    ("agents", "add_thread"),
    ("agents", "change_thread"),
    ("agents", "view_suspension"),
    ("agents", "decide_suspension"),
]
