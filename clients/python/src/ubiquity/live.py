"""Live queries on the change feed (docs/changes.md "Live queries"): a predicate's result set
followed transaction by transaction, as typed values.

`store.changes(live_query=LiveQuery("Person", "age >= $min", {"min": 30}))` subscribes to the
query instead of raw changes; each `FeedEvent` of kind "live_query" carries a `LiveQueryUpdate`
(which objects entered, changed inside or left the set), and `feed.live_query_updates()` yields
only those. Start points, resume tokens and reconnects are the plain feed's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ubiquity.v1 import changes_pb2 as ch

from .model import Object
from .values import to_argument


@dataclass(frozen=True)
class LiveQuery:
    """What to follow: objects of `entity` (sub-entities included) matching `predicate`
    (NSPredicate format, as a fetch's; "" for every object), its `$variables` bound by
    `arguments`. A predicate that does not check ends the feed with `InvalidArgumentError`."""

    entity: str
    predicate: str = ""
    arguments: Mapping[str, object] = field(default_factory=dict)

    def message(self) -> ch.LiveQuery:
        return ch.LiveQuery(entity=self.entity, predicate=self.predicate,
                            arguments={k: to_argument(v) for k, v in self.arguments.items()})


@dataclass(frozen=True)
class LiveQueryObject:
    object_id: str
    object: Object | None  # the whole object after the transaction, with include_values=True

    @staticmethod
    def of(o: ch.LiveQueryObject) -> "LiveQueryObject":
        return LiveQueryObject(o.object_id, Object.of(o.object) if o.HasField("object") else None)


@dataclass(frozen=True)
class LiveQueryUpdate:
    """One transaction's effect on the result set. Applying every update to a fetch at the feed's
    start token (entered and changed put the object in, left takes it out) gives the fetch at
    `token`."""

    token: bytes
    generation: int
    entered: list[LiveQueryObject]  # did not match before (or did not exist), match now
    changed: list[LiveQueryObject]  # matched before and still do, and changed
    left_object_ids: list[str]      # matched before, no longer (changed out of it, or deleted)

    @staticmethod
    def of(u: ch.LiveQueryUpdate) -> "LiveQueryUpdate":
        return LiveQueryUpdate(u.token, u.generation, [LiveQueryObject.of(o) for o in u.entered],
                               [LiveQueryObject.of(o) for o in u.changed], list(u.left_object_ids))


__all__ = ["LiveQuery", "LiveQueryObject", "LiveQueryUpdate"]
