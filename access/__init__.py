"""Who is calling: API tokens and their scopes, the reviewers' permissions, revocation, rate
limits and the login lockout (ARCHITECTURE.md)."""
