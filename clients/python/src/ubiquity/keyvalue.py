"""The account's key-value store (docs/keyvalue.md in the repository): small values by key,
versioned, written with compare-and-set preconditions. `client.key_values` on either client."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

from . import _ops as ops
from ._calls import AsyncCaller, Caller
from .results import KeyValueEntry, KeyValuePage, KeyValueWrite


class KeyValues:
    """`get` raises NotFoundError (KEY_NOT_FOUND) for a key that is not set; a write whose
    precondition fails raises KeyValueConflictError with the key's current version; one over a
    quota KeyValueQuotaError."""

    def __init__(self, calls: Caller) -> None:
        self._calls = calls

    def get(self, key: str) -> KeyValueEntry:
        return self._calls.run(ops.kv_get(key))

    def set(self, key: str, value: bytes, *, expected_version: int | None = None, must_not_exist: bool = False,
            author: str = "") -> KeyValueWrite:
        """Sets `key`; only if it is at `expected_version`, or (`must_not_exist`) not set, when given."""
        return self._calls.run(ops.kv_set(key, value, expected_version, must_not_exist, author))

    def delete(self, key: str, *, expected_version: int | None = None, author: str = "") -> KeyValueWrite:
        return self._calls.run(ops.kv_delete(key, expected_version, author))

    def list(self, prefix: str = "", *, page_size: int = 0, page_token: bytes = b"",
             keys_only: bool = False) -> KeyValuePage:
        """One page of keys starting with `prefix`, in key order."""
        return self._calls.run(ops.kv_list(prefix, page_size, page_token, keys_only))

    def entries(self, prefix: str = "", *, keys_only: bool = False) -> Iterator[KeyValueEntry]:
        """Every entry under `prefix`, page after page."""
        token = b""
        while True:
            page = self.list(prefix, page_token=token, keys_only=keys_only)
            yield from page.entries
            if not page.next_page_token:
                return
            token = page.next_page_token


class AsyncKeyValues:
    """`KeyValues` for `ubiquity.aio.Client`: the same calls, awaited."""

    def __init__(self, calls: AsyncCaller) -> None:
        self._calls = calls

    async def get(self, key: str) -> KeyValueEntry:
        return await self._calls.run(ops.kv_get(key))

    async def set(self, key: str, value: bytes, *, expected_version: int | None = None,
                  must_not_exist: bool = False, author: str = "") -> KeyValueWrite:
        return await self._calls.run(ops.kv_set(key, value, expected_version, must_not_exist, author))

    async def delete(self, key: str, *, expected_version: int | None = None, author: str = "") -> KeyValueWrite:
        return await self._calls.run(ops.kv_delete(key, expected_version, author))

    async def list(self, prefix: str = "", *, page_size: int = 0, page_token: bytes = b"",
                   keys_only: bool = False) -> KeyValuePage:
        return await self._calls.run(ops.kv_list(prefix, page_size, page_token, keys_only))

    async def entries(self, prefix: str = "", *, keys_only: bool = False) -> AsyncIterator[KeyValueEntry]:
        token = b""
        while True:
            page = await self.list(prefix, page_token=token, keys_only=keys_only)
            for e in page.entries:
                yield e
            if not page.next_page_token:
                return
            token = page.next_page_token
