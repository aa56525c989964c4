"""The test run's cache: Django's Redis cache under the run's key prefix, whose ``clear`` removes the
run's keys only.

Django's ``RedisCache.clear`` is ``FLUSHDB``. Several runs on one machine may share a Redis database,
each with its own key prefix (``JOINTLINE_REDIS_KEY_PREFIX``, its Celery queues included), and every
test clears the cache first: a flush from one run emptied the queues of another, whose worker then
started on an empty queue and waited for tasks that were gone.
"""

from __future__ import annotations

from django.core.cache.backends.redis import RedisCache


class RunCache(RedisCache):
    def clear(self) -> bool:
        if not self.key_prefix:
            raise ValueError("a test run's cache needs a KEY_PREFIX: clear() removes its keys only")
        client = self._cache.get_client(None, write=True)
        keys = list(client.scan_iter(match=f"{self.key_prefix}*", count=1000))
        for start in range(0, len(keys), 1000):
            client.delete(*keys[start : start + 1000])
        return True
