"""Django's PostgreSQL backend; only the pool's check of a connection differs (gateway.dbpool)."""

from typing import Any

from django.db.backends.postgresql import base

from gateway import dbpool


class DatabaseWrapper(base.DatabaseWrapper):
    @property
    def pool(self) -> Any:
        pool = super().pool
        if pool is not None and not getattr(pool, "_checks_all_when_one_is_dead", False):
            # Django hands the pool a check of its own choosing (or none) and no setting
            # changes it; psycopg_pool keeps it in this attribute.
            pool._check = dbpool.checker(pool)
            pool._checks_all_when_one_is_dead = True
        return pool
