"""Django's PostgreSQL backend, with a connection pool that recovers from a restart at once."""
