"""Recently answered failures, per channel: a second paste of the same failure links to the
first answer. Only a failure fingerprint (a hash; see analysis.fingerprint) and where the
answer is (platform ids) are kept, for `ttl` seconds, at most `size` entries."""
from __future__ import annotations

import hashlib

from cachetools import TTLCache


class Dedup:
    def __init__(self, ttl: float, size: int = 50_000):
        self._seen: TTLCache = TTLCache(maxsize=size, ttl=ttl)

    @staticmethod
    def _key(scope: tuple[str, ...], fingerprint: str) -> str:
        return hashlib.sha256("\x1f".join((*scope, fingerprint)).encode()).hexdigest()

    def get(self, scope: tuple[str, ...], fingerprint: str | None) -> dict | None:
        return self._seen.get(self._key(scope, fingerprint)) if fingerprint else None

    def put(self, scope: tuple[str, ...], fingerprint: str | None, where: dict) -> None:
        if fingerprint:
            self._seen[self._key(scope, fingerprint)] = where

    def __len__(self) -> int:
        return len(self._seen)
