"""The account's key-value store (docs/keyvalue.md in the repository): small values by key,
versioned, written with compare-and-set preconditions, and its change feed (`changes()`: typed
`KeyValueChange`s with their reason, resumed from the last token). `client.key_values` on either
client."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Iterator
from typing import TYPE_CHECKING

from ubiquity.v1 import changes_pb2 as ch

from . import _ops as ops
from ._calls import AsyncCaller, Caller
from .feed import ChangeFeed, Resumer, Start, StoreEventHook, renews_session, sync_feed
from .results import KeyValueEntry, KeyValuePage, KeyValueWrite

if TYPE_CHECKING:
    from .aio import AsyncStoreEventHook, ChangeFeed as AsyncChangeFeed


def feed_resumer(start: Start, exclude_authors: Iterable[str], reconnect_for: float, renews_session: bool) -> Resumer:
    """Where a key-value feed starts; `start` "now" must already be a token (see `changes`)."""
    return Resumer("", start, ch.ChangeFilter(), reconnect_for, renews_session=renews_session,
                   key_values=ch.KeyValueSubscription(exclude_authors=list(exclude_authors)))


# The position now: any List answers it (`feed_token`); the smallest one costs least.
_POSITION = ops.kv_list("", 1, b"", True)


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

    def changes(self, *, start: Start = "now", exclude_authors: Iterable[str] = (),
                on_store_event: StoreEventHook | None = None, reconnect_for: float = 60.0) -> ChangeFeed:
        """The account's key-value changes as a feed (`feed.key_value_changes()` yields only them).

        `start`: "now" (read here, so every write that returns after this call is in the feed),
        "oldest" (first every key set now, reason INITIAL_SYNC, then `caught_up`, then live), or a
        token (a change's `token`, `feed.token`, a write's `feed_token` or a page's): what changed
        after it. `exclude_authors` skips changes made by those authors (typically this device).
        The feed resumes from its last token after a broken stream like a store's feed, and
        `on_store_event` sees account transitions (a sign-out's WILL_CHANGE / DID_CHANGE)."""
        if start == "now":
            start = self._calls.run(_POSITION).feed_token
        resume = feed_resumer(start, exclude_authors, reconnect_for, renews_session(self._calls.session))
        return sync_feed(self._calls, resume, None, on_store_event)


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

    async def changes(self, *, start: Start = "now", exclude_authors: Iterable[str] = (),
                      on_store_event: "AsyncStoreEventHook | None" = None,
                      reconnect_for: float = 60.0) -> "AsyncChangeFeed":
        """As `KeyValues.changes`: `async for change in feed.key_value_changes()`."""
        from .aio import ChangeFeed as AsyncFeed  # aio builds on this module

        if start == "now":
            start = (await self._calls.run(_POSITION)).feed_token
        resume = feed_resumer(start, exclude_authors, reconnect_for, renews_session(self._calls.session))
        return AsyncFeed(self._calls, resume, None, on_store_event)
