"""Sessions read from the shared cache first, and from the database when the cache is down.

Django's `cached_db` engine saves a query per request, but a request whose cache read
succeeds and whose cache write or membership check fails is a 500: with Redis down, every
request that carries a session cookie failed. This engine treats the cache as an
optimisation only: any cache error is logged and the database answers. The database is
always written first, so it stays the truth.

A cache entry lives at most `SESSION_CACHE_SECONDS`: a logout during an outage deletes the
database row but cannot delete the cached copy, which must not outlive the outage by long.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

from django.contrib.sessions.backends.cached_db import SessionStore as CachedDbStore
from django.contrib.sessions.backends.db import SessionStore as DbStore
from redis.exceptions import RedisError

logger = logging.getLogger(__name__)

SESSION_CACHE_SECONDS = 300
# What an unreachable cache raises: redis-py's errors, and the socket's own.
CACHE_ERRORS = (RedisError, OSError)
T = TypeVar("T")


class SessionStore(CachedDbStore):
    """`cached_db` sessions that fall back to the database whenever the cache fails."""

    def _cached(self, call: Callable[..., T], *args: Any) -> T | None:
        try:
            return call(*args)
        except CACHE_ERRORS as exc:
            logger.warning("session cache unavailable, using the database: %s", exc)
            return None

    def _cache_timeout(self, expiry: datetime | None = None) -> int:
        return min(self.get_expiry_age(expiry=expiry), SESSION_CACHE_SECONDS)

    def load(self) -> dict[str, Any]:
        data = self._cached(self._cache.get, self.cache_key)
        if data is not None:
            return data
        stored = self._get_session_from_db()
        if not stored:
            return {}
        data = self.decode(stored.session_data)
        self._cached(self._cache.set, self.cache_key, data, self._cache_timeout(stored.expire_date))
        return data

    def exists(self, session_key: str | None) -> bool:
        if session_key and self._cached(self._cache.has_key, self.cache_key_prefix + session_key):
            return True
        return DbStore.exists(self, session_key)

    def save(self, must_create: bool = False) -> None:
        DbStore.save(self, must_create)
        self._cached(self._cache.set, self.cache_key, self._session, self._cache_timeout())

    def delete(self, session_key: str | None = None) -> None:
        DbStore.delete(self, session_key)
        key = session_key or self.session_key
        if key is not None:
            self._cached(self._cache.delete, self.cache_key_prefix + key)
