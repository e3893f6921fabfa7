"""Python values read from a record against a schema: their observed types, and their
conversion to a column's type (``Misfit`` when they do not fit). The rules are
``decoding.schema``'s; this is how the executors apply them to decoded values."""

from __future__ import annotations

import datetime as dt
import decimal
import re
from typing import Any

from lakehouse_assets.sources.decoding import schema as types
from lakehouse_assets.sources.decoding.schema import Type

DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
DATE_TIME = re.compile(
    r"\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}(:?\d{2})?)?)?"
)
INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)


class Misfit(Exception):
    """A value that does not fit its field's type."""

    def __init__(self, path: tuple[str, ...], expected: Type, seen: Type | None) -> None:
        super().__init__(path)
        self.path, self.expected, self.seen = path, expected, seen

    @property
    def reason(self) -> str:
        expected = self.expected if isinstance(self.expected, str) else describe(self.expected)
        return f"incompatible {'.'.join(self.path)}: expected {expected}, got {describe(self.seen)}"


def observed(value: Any) -> Type | None:
    """The type of a decoded JSON value (None for null); arrays of several types: ``variant``."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, decimal.Decimal):
        return decimal_type(value)
    if isinstance(value, bytes):
        return "binary"
    if isinstance(value, dt.datetime):
        return "timestamp"
    if isinstance(value, dt.date):
        return "date"
    if isinstance(value, int):
        return "long" if INT64[0] <= value <= INT64[1] else "double"
    if isinstance(value, float):
        return "double"
    if isinstance(value, str):
        return "string"
    if isinstance(value, dict):
        fields = {k: observed(v) for k, v in value.items()}
        return {k: v for k, v in fields.items() if v is not None}
    element: Type | None = None
    for item in value:
        seen = observed(item)
        if seen is not None:
            element = seen if element is None else (types.widen(element, seen) or types.MIXED)
    return [] if element is None else [element]


def decimal_type(value: decimal.Decimal) -> str:
    """The narrowest ``decimal(p,s)`` holding ``value`` exactly (``decimal(3,2)`` for 0.05)."""
    _, digits, exponent = value.as_tuple()
    if not isinstance(exponent, int):
        return "string"  # NaN or an infinity: no decimal holds it
    scale = max(0, -exponent)
    return types.decimal(max(len(digits) + max(exponent, 0), scale, 1), scale)


def fit_decimal(value: decimal.Decimal, declared: str) -> decimal.Decimal | None:
    """``value`` at the scale of the ``decimal(p,s)`` type ``declared`` (exactly: never rounded),
    or None when it does not fit (more fraction digits, or integer digits, than it holds)."""
    digits = types.decimal_digits(declared)
    seen = decimal_type(value)
    if digits is None or not types.accepts(declared, seen):
        return None
    return value.quantize(decimal.Decimal(1).scaleb(-digits[1]), context=EXACT)


EXACT = decimal.Context(prec=types.MAX_PRECISION, traps=[decimal.Inexact])


def describe(value: Type | None) -> str:
    """A type as a reason names it: ``object<value: long>``, ``array<string>``."""
    if value is None:
        return "null"
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return "object<" + ", ".join(f"{k}: {describe(v)}" for k, v in value.items()) + ">"
    return f"array<{describe(value[0]) if value else 'unknown'}>"


def convert(
    value: Any, declared: Type, path: tuple[str, ...], issues: list, empty_is_null: bool = True
) -> Any:
    """``value`` as a column of type ``declared`` holds it; an empty string as NULL when
    ``empty_is_null``, else as a value (a string field's; it fits no other type).

    Raises:
        Misfit: it does not fit (the caller quarantines the record).
    """
    if value is None or (empty_is_null and value == ""):
        return None
    if isinstance(declared, dict):
        if not isinstance(value, dict):
            raise Misfit(path, declared, observed(value))
        out = {}
        for name, item in value.items():
            kind = declared.get(name)
            if kind is None:
                if item is not None:
                    issues.append(((*path, name), observed(item)))  # a new field
            elif item is None or (empty_is_null and item == ""):
                out[name] = None
            elif kind == "string" and type(item) is str:  # the common case, first
                out[name] = item
            else:
                out[name] = convert(item, kind, (*path, name), issues, empty_is_null)
        return out
    if isinstance(declared, list):
        if not isinstance(value, list):
            raise Misfit(path, declared, observed(value))
        if not declared:
            if any(item is not None for item in value):
                raise Misfit(path, declared, observed(value))
            return value
        inner: list = []
        try:
            items = [convert(item, declared[0], path, inner, empty_is_null) for item in value]
        except Misfit:
            raise Misfit(path, declared, observed(value)) from None
        if inner:  # new fields in the elements: the array's type grows as a whole
            issues.append((path, observed(value)))
        return items
    return _scalar(value, declared, path)


def _scalar(value: Any, declared: str, path: tuple[str, ...]) -> Any:
    kind = type(value)
    if declared == "string" and kind is str:
        return value
    if declared in ("long", "int") and kind is int:
        low, high = INT32 if declared == "int" else INT64
        if low <= value <= high:
            return value
    elif declared == "double" and kind in (int, float):
        return float(value)
    elif (declared, kind) in (("boolean", bool), ("binary", bytes)):
        return value
    elif kind in (int, float, decimal.Decimal) and types.DECIMAL.fullmatch(declared):
        fitted = fit_decimal(decimal.Decimal(repr(value) if kind is float else value), declared)
        if fitted is not None:
            return fitted
    elif declared == "date" and kind is str and DATE.fullmatch(value):
        try:
            return dt.date.fromisoformat(value)
        except ValueError:
            pass
    elif declared == "timestamp" and kind is str and DATE_TIME.fullmatch(value):
        try:
            return timestamp(value)
        except ValueError:
            pass
    raise Misfit(path, declared, observed(value) if kind is not str else _text_kind(value))


def _text_kind(value: str) -> str:
    """Text as an observed type: ``timestamp`` for a date-time (a ``date`` field widens)."""
    return "timestamp" if DATE_TIME.fullmatch(value) and not DATE.fullmatch(value) else "string"


def timestamp(text: str) -> dt.datetime:
    moment = dt.datetime.fromisoformat(text.replace(" ", "T", 1))
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)


def fit(value: Any, declared: Type, seen: Type, path: tuple[str, ...]) -> Any:
    """``value``, of type ``seen``, as a column of type ``declared`` holds it.

    Raises:
        Misfit: ``declared`` does not hold values of type ``seen``.
    """
    if value is None:
        return value
    if declared == seen:
        if isinstance(value, decimal.Decimal) and fit_decimal(value, str(declared)) is None:
            # More digits than its own Connect type holds: the column widens to hold the value.
            raise Misfit(path, declared, decimal_type(value))
        return value
    if not types.accepts(declared, seen):
        raise Misfit(path, declared, seen)
    if isinstance(declared, dict) and isinstance(seen, dict):
        return {k: fit(value.get(k), declared[k], t, (*path, k)) for k, t in seen.items()}
    if isinstance(declared, list) and isinstance(seen, list):
        return [fit(item, declared[0], seen[0], path) for item in value] if seen else value
    if declared == "timestamp" and isinstance(value, dt.date):
        return dt.datetime.combine(value, dt.time(), dt.UTC)
    if isinstance(declared, str) and types.DECIMAL.fullmatch(declared):
        fitted = fit_decimal(decimal.Decimal(value), declared)
        if fitted is None:
            raise Misfit(path, declared, seen)
        return fitted
    # The rules of plain JSON values: an integer's range, ISO text as a date or a date-time.
    return convert(value, declared, path, [], empty_is_null=False)
