"""The schema of a declared JSON source: a tree of types, inferred from the data, persisted as a
file a person can read and edit, and evolved as the data changes.

A schema is written as the JSON document it describes, each value replaced by its type::

    {"id": "long", "price": "double", "customer": {"name": "string"}, "tags": ["string"],
     "items": [{"sku": "string", "qty": "long"}], "created": "timestamp", "notes": []}

Scalar types: ``boolean``, ``int``, ``long``, ``double``, ``string``, ``date`` (an ISO date
string), ``timestamp`` (an ISO date-time string), ``decimal(p,s)`` (precision at most 38) and
``binary``; an object is a mapping; an array is a list of its element's type, ``[]`` while only
empty arrays were seen. Inference types JSON numbers as ``long`` or ``double`` and text as
``string``, as Spark's JSON reader does; ``int``, ``date`` and ``timestamp`` come from an edited
file, and every type from a Kafka Connect schema (``lakehouse_assets.sources.decoding.connect``).

Evolution never loses data: a new field adds a column; a value a wider type holds widens the
column (``int`` -> ``long`` -> ``double``, ``date`` -> ``timestamp``, a decimal to one with as
many digits on each side of the point as both (``int`` and ``long`` count as ``decimal(10,0)``
and ``decimal(19,0)``), ``[]`` -> any array, new fields of nested objects); any other value is
incompatible, and its record is quarantined.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any, TypeAlias

import pyarrow as pa
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

Type: TypeAlias = "str | dict[str, Type] | list[Type]"
Schema: TypeAlias = "dict[str, Type]"

SCALARS = ("boolean", "int", "long", "double", "string", "date", "timestamp", "binary")
DECIMAL = re.compile(r"decimal\((\d+),(\d+)\)")  # decimal(p,s), as Spark writes it
MAX_PRECISION = 38  # Spark's
# The digits of an integer type, as a decimal widened by it counts them.
INTEGER_DIGITS = {"int": 10, "long": 19}
MIXED = "variant"  # values of several types (the elements of an array)
# What each scalar type accepts (types of values, as ``observed`` names them).
ACCEPTS = {
    "boolean": {"boolean"},
    "int": {"long"},  # when the value fits: checked on the values
    "long": {"long", "int"},
    "double": {"long", "int", "double"},
    "string": {"string"},
    "date": {"string", "date"},  # ISO dates: checked on the values
    "timestamp": {"string", "date", "timestamp"},  # ISO dates and date-times: checked too
    "binary": {"binary"},
}
WIDER = {"int": ("long", "double"), "long": ("double",), "date": ("timestamp",)}
_SPARK = {"long": "bigint", "int": "int"}
_DATA_TYPES = {
    "boolean": BooleanType, "int": IntegerType, "long": LongType, "double": DoubleType,
    "string": StringType, "date": DateType, "timestamp": TimestampType, "binary": BinaryType,
}  # fmt: skip


class SchemaError(ValueError):
    """A schema file that does not describe a schema."""


# ----- decimals ----------------------------------------------------------------------------------
def decimal(precision: int, scale: int) -> str:
    """The type ``decimal(precision,scale)``."""
    return f"decimal({precision},{scale})"


def decimal_digits(value: Type | None) -> tuple[int, int] | None:
    """``(precision, scale)`` of a decimal type (an integer type as the decimal of its digits),
    None for any other type."""
    if not isinstance(value, str):
        return None
    if value in INTEGER_DIGITS:
        return INTEGER_DIGITS[value], 0
    match = DECIMAL.fullmatch(value)
    return (int(match[1]), int(match[2])) if match else None


def _wider_decimal(declared: str, seen: str) -> str | None:
    """The narrowest decimal holding both types (one at least a decimal), None beyond 38 digits."""
    ours, theirs = decimal_digits(declared), decimal_digits(seen)
    either = DECIMAL.fullmatch(declared) or DECIMAL.fullmatch(seen)
    if ours is None or theirs is None or not either:
        return None
    scale = max(ours[1], theirs[1])
    precision = max(ours[0] - ours[1], theirs[0] - theirs[1]) + scale
    return decimal(precision, scale) if precision <= MAX_PRECISION else None


# ----- evolution ---------------------------------------------------------------------------------
def accepts(declared: Type, seen: Type) -> bool:
    """Whether a column of type ``declared`` holds values of type ``seen`` as they are."""
    if isinstance(declared, str) and DECIMAL.fullmatch(declared):
        return isinstance(seen, str) and _wider_decimal(declared, seen) == declared
    if isinstance(declared, str):
        return isinstance(seen, str) and seen in ACCEPTS[declared]
    if isinstance(declared, dict):
        return isinstance(seen, dict) and all(
            name in declared and accepts(declared[name], value) for name, value in seen.items()
        )
    if not isinstance(seen, list):
        return False
    if not seen:
        return True  # an empty array fits any array
    return bool(declared) and accepts(declared[0], seen[0])


def widen(declared: Type | None, seen: Type) -> Type | None:
    """The narrowest type holding both ``declared`` values and ``seen`` ones, or None when
    there is none (the values are incompatible). ``declared`` None: a new field."""
    if declared is None:
        return None if _has_mixed(seen) else seen
    if accepts(declared, seen):
        return declared
    if isinstance(declared, str) and isinstance(seen, str):
        if DECIMAL.fullmatch(declared) or DECIMAL.fullmatch(seen):
            return _wider_decimal(declared, seen)
        if seen in WIDER.get(declared, ()):
            return seen
        if declared == "int" and seen == "double":
            return "double"
        return None
    if isinstance(declared, dict) and isinstance(seen, dict):
        merged = dict(declared)
        for name, value in seen.items():
            wider = widen(declared.get(name), value)
            if wider is None:
                return None
            merged[name] = wider
        return merged
    if isinstance(declared, list) and isinstance(seen, list):
        if not declared:
            return None if _has_mixed(seen) else seen
        element = widen(declared[0], seen[0])
        return None if element is None else [element]
    return None


def evolve(schema: Schema, seen: Type) -> Schema:
    """``schema`` grown by what the data shows: new fields added, compatible values widened.
    Fields whose values are incompatible (or of several types) keep their type: their records
    are quarantined."""
    if not isinstance(seen, dict):
        return schema
    grown = dict(schema)
    for name, value in seen.items():
        if value == MIXED:
            continue
        if isinstance(value, dict) and isinstance(schema.get(name), dict | None):
            grown[name] = evolve(schema.get(name) or {}, value)  # type: ignore[arg-type]
            continue
        wider = widen(schema.get(name), value)
        if wider is not None:
            grown[name] = wider
    return grown


def _has_mixed(value: Type) -> bool:
    if value == MIXED:
        return True
    if isinstance(value, dict):
        return any(_has_mixed(v) for v in value.values())
    return isinstance(value, list) and any(_has_mixed(v) for v in value)


# ----- Spark columns -----------------------------------------------------------------------------
def spark_type(value: Type) -> str:
    """The Spark SQL type of a column of type ``value``."""
    if isinstance(value, str):
        return _SPARK.get(value, value)
    if isinstance(value, dict):
        fields = ", ".join(f"`{name}`: {spark_type(v)}" for name, v in value.items())
        return f"struct<{fields}>"
    return f"array<{spark_type(value[0]) if value else 'string'}>"


def data_type(value: Type) -> DataType:
    """The Spark data type of a column of type ``value``."""
    if isinstance(value, str):
        if value not in _DATA_TYPES:
            return DecimalType(*_digits(value))
        return _DATA_TYPES[value]()
    if isinstance(value, dict):
        return StructType([StructField(name, data_type(v)) for name, v in value.items()])
    return ArrayType(data_type(value[0]) if value else StringType())


def leaves(
    schema: Schema, flatten: bool, separator: str = "_"
) -> Iterator[tuple[str, tuple[str, ...], Type]]:
    """``(column, path, type)`` of each column a record becomes: nested objects are flattened
    into ``parent<separator>child`` columns when ``flatten`` (arrays are kept whole)."""
    for name, value in schema.items():
        if flatten and isinstance(value, dict) and value:
            for column, path, leaf in leaves(value, flatten, separator):
                yield f"{name}{separator}{column}", (name, *path), leaf
        else:
            yield name, (name,), value


# ----- the file ----------------------------------------------------------------------------------
def dumps(schema: Schema) -> str:
    """The schema as the file people read and edit (fields one per line, in record order)."""
    return json.dumps(schema, indent=2) + "\n"


def loads(text: str, where: str) -> Schema:
    """The schema a file holds.

    Raises:
        SchemaError: the file is not JSON, or names a type that does not exist (naming where).
    """
    try:
        schema = json.loads(text)
    except json.JSONDecodeError as error:
        raise SchemaError(f"{where}: not JSON: {error}") from None
    if not isinstance(schema, dict):
        raise SchemaError(f"{where}: a schema is a JSON object of fields")
    _check(schema, where, "")
    return schema


def _check(value: Any, where: str, path: str) -> None:
    if isinstance(value, Mapping):
        for name, child in value.items():
            _check(child, where, f"{path}.{name}" if path else name)
    elif isinstance(value, list):
        if len(value) > 1:
            raise SchemaError(f"{where}: {path}: an array type lists one element type")
        for child in value:
            _check(child, where, f"{path}[]")
    elif not isinstance(value, str) or (value not in SCALARS and not _valid_decimal(value)):
        names = ", ".join([*SCALARS, "decimal(p,s)"])
        raise SchemaError(f"{where}: {path}: unknown type {value!r}; types: {names} (p <= 38)")


def _valid_decimal(value: str) -> bool:
    digits = decimal_digits(value) if DECIMAL.fullmatch(value) else None
    return digits is not None and 0 < digits[0] <= MAX_PRECISION and digits[1] <= digits[0]


def _digits(value: str) -> tuple[int, int]:
    digits = decimal_digits(value)
    if digits is None:
        raise KeyError(value)
    return digits


def arrow_type(declared: Type) -> pa.DataType:
    """The Arrow type of a column of type ``declared``."""
    if isinstance(declared, str):
        if DECIMAL.fullmatch(declared):
            return pa.decimal128(*_digits(declared))
        return {
            "boolean": pa.bool_(), "int": pa.int32(), "long": pa.int64(),
            "double": pa.float64(), "string": pa.string(), "date": pa.date32(),
            "timestamp": pa.timestamp("us", tz="UTC"), "binary": pa.binary(),
        }[declared]  # fmt: skip
    if isinstance(declared, dict):
        return pa.struct([(name, arrow_type(t)) for name, t in declared.items()])
    return pa.list_(arrow_type(declared[0]) if declared else pa.string())
