"""Python values <-> `ubiquity.v1.Value` (objects.proto).

The server is typed by its model; Python is not. A plain `int` becomes `int64_value`, which the
server accepts for any integer attribute within range; pass `Typed(x, "int16")` (or a `Value`) when
the exact kind matters.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from decimal import Decimal
from typing import Union

from ubiquity.v1 import objects_pb2 as ob

# What a value read from the store becomes in Python.
PyValue = Union[None, str, bool, int, float, Decimal, datetime, bytes, uuid.UUID]


@dataclass(frozen=True)
class Typed:
    """A value with an explicit wire kind: `Typed(3, "int16")`, `Typed("https://x", "uri")`."""

    value: object
    kind: str


ValueLike = Union[PyValue, Typed, ob.Value]


def to_value(x: ValueLike) -> ob.Value:
    if isinstance(x, ob.Value):
        return x
    if isinstance(x, Typed):
        if x.kind == "null":
            return ob.Value(null_value="NULL_VALUE")
        if x.kind == "date":
            assert isinstance(x.value, datetime)
            return _date(x.value)
        return ob.Value(**{f"{x.kind}_value": x.value})  # type: ignore[arg-type]
    if x is None:
        return ob.Value(null_value="NULL_VALUE")
    # bool before int: bool is an int in Python.
    if isinstance(x, bool):
        return ob.Value(bool_value=x)
    if isinstance(x, int):
        return ob.Value(int64_value=x)
    if isinstance(x, float):
        return ob.Value(double_value=x)
    if isinstance(x, str):
        return ob.Value(string_value=x)
    if isinstance(x, bytes):
        return ob.Value(binary_value=x)
    if isinstance(x, Decimal):
        return ob.Value(decimal_value=str(x))
    if isinstance(x, uuid.UUID):
        return ob.Value(uuid_value=str(x))
    if isinstance(x, datetime):
        return _date(x)
    raise TypeError(f"no ubiquity Value for {type(x).__name__}: {x!r}")


def _date(d: datetime) -> ob.Value:
    val = ob.Value()
    # Naive datetimes are taken as UTC rather than the machine's local zone: the store has no zone.
    val.date_value.FromDatetime(d if d.tzinfo is None else d.astimezone(timezone.utc))
    return val


def from_value(val: ob.Value) -> PyValue:
    kind = val.WhichOneof("kind")
    if kind is None or kind == "null_value":
        return None
    if kind == "date_value":
        return val.date_value.ToDatetime(tzinfo=timezone.utc)
    if kind == "decimal_value":
        return Decimal(val.decimal_value)
    if kind == "uuid_value":
        return uuid.UUID(val.uuid_value)
    result: PyValue = getattr(val, kind)
    return result


def to_values(values: Mapping[str, ValueLike]) -> dict[str, ob.Value]:
    return {k: to_value(x) for k, x in values.items()}


def from_values(values: Mapping[str, ob.Value]) -> dict[str, PyValue]:
    return {k: from_value(x) for k, x in values.items()}


def to_argument(x: object) -> ob.Argument:
    """A predicate argument: a list/tuple/set becomes a ValueList (for IN), anything else a Value."""
    if isinstance(x, (list, tuple, set, frozenset)):
        return ob.Argument(list=ob.ValueList(values=[to_value(e) for e in x]))
    return ob.Argument(value=to_value(x))  # type: ignore[arg-type]
