"""Infrastructure helpers below every app: the database pool and backend, the broker, pub/sub,
compiled statements, async helpers and logs. They import no app (ARCHITECTURE.md)."""
