"""mem0-style metadata filters, compiled once into a predicate over records.

Shape (as in mem0's ``search``/``get_all``)::

    {"category": "identity",                    # plain value = eq
     "metadata.source": {"eq": "chat"},         # explicit metadata path
     "source": {"in": ["chat", "email"]},       # non-record key = metadata key
     "created_at": {"gte": "2026-01-01"},       # ranges on timestamps
     "tags": "*",                               # wildcard: field is present
     "AND": [{...}, {...}], "OR": [{...}], "NOT": {...} or [{...}]}

Operators: eq, ne, gt, gte, lt, lte, in, nin, contains, icontains (a leading
``$`` is accepted too). Several keys in one dict are ANDed; several operators
on one field are ANDed. ``NOT`` with a list means "none of these match" (as
mem0's ``must_not``). Record fields (``id``, ``text``, ``category``,
``importance``, ``created_at``, ``updated_at``, ``expires_at``, ``version``,
``status``, ``blob_id``, ``end_epoch``) are matched on the record; every other
key is a metadata key. ``metadata.a.b`` reaches into nested objects.

A missing field never satisfies eq/gt/gte/lt/lte/in/contains/icontains and
always satisfies ne/nin. Comparisons between different types (a number and a
string) are false, not errors. A malformed filter raises
:class:`~walrus_mem.errors.InvalidInput` when compiled, before any work.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from .._memory.inputs import to_timestamp
from ..errors import InvalidInput

__all__ = ["OPERATORS", "RECORD_FIELDS", "Predicate", "compile_filters"]

Predicate = Callable[[Mapping[str, Any]], bool]

OPERATORS: Final = ("eq", "ne", "gt", "gte", "lt", "lte", "in", "nin", "contains", "icontains")
RECORD_FIELDS: Final = frozenset(
    {
        "id",
        "text",
        "category",
        "importance",
        "created_at",
        "updated_at",
        "expires_at",
        "version",
        "status",
        "blob_id",
        "quilt_patch_id",
        "end_epoch",
    }
)
TIME_FIELDS: Final = frozenset({"created_at", "updated_at", "expires_at"})
_LOGIC: Final = {"AND": "AND", "$AND": "AND", "OR": "OR", "$OR": "OR", "NOT": "NOT", "$NOT": "NOT"}
_MISSING: Final = object()
MAX_DEPTH: Final = 32  # nesting of filter objects and lists; deeper input is refused


def compile_filters(filters: Mapping[str, Any] | None) -> Predicate | None:
    """Compile ``filters`` into a predicate over record views; ``None`` matches all.

    A record view is a mapping with the record fields above (timestamps as
    unix seconds) and ``metadata`` (a dict).
    """
    if filters is None:
        return None
    if not isinstance(filters, Mapping):
        raise InvalidInput(f"filters must be a mapping, not {type(filters).__name__}")
    if not filters:
        return None
    if _too_deep(filters):
        raise InvalidInput(f"filters are nested more than {MAX_DEPTH} levels deep")
    return _compile_dict(filters, "filters")


def _too_deep(value: Any) -> bool:
    """Whether mappings/lists nest past MAX_DEPTH (iterative: no recursion on hostile input)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, Mapping):
            children: Any = node.values()
        elif isinstance(node, list | tuple):
            children = node
        else:
            continue
        if depth > MAX_DEPTH:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def _compile_dict(spec: Mapping[str, Any], where: str) -> Predicate:
    if not isinstance(spec, Mapping):
        raise InvalidInput(f"{where} must be a mapping, not {type(spec).__name__}")
    if not spec:
        raise InvalidInput(f"{where} is an empty filter")
    parts: list[Predicate] = []
    for key, value in spec.items():
        if not isinstance(key, str) or not key:
            raise InvalidInput(f"{where}: filter keys must be non-empty strings")
        logic = _LOGIC.get(key.upper())
        if logic is not None:
            parts.append(_compile_logic(logic, value, f"{where}.{key}"))
        else:
            parts.append(_compile_field(key, value, where))
    if len(parts) == 1:
        return parts[0]
    return lambda rec: all(p(rec) for p in parts)


def _compile_list(value: Any, where: str) -> list[Predicate]:
    if isinstance(value, Mapping):
        value = [value]
    if not isinstance(value, list | tuple) or not value:
        raise InvalidInput(f"{where} must be a non-empty list of filter objects")
    return [_compile_dict(item, f"{where}[{i}]") for i, item in enumerate(value)]


def _compile_logic(logic: str, value: Any, where: str) -> Predicate:
    preds = _compile_list(value, where)
    if logic == "AND":
        return lambda rec: all(p(rec) for p in preds)
    if logic == "OR":
        return lambda rec: any(p(rec) for p in preds)
    return lambda rec: not any(p(rec) for p in preds)


def _getter(key: str) -> Callable[[Mapping[str, Any]], Any]:
    if key.startswith("metadata."):
        path = key.split(".")[1:]
        if not all(path):
            raise InvalidInput(f"filter key {key!r} has an empty path segment")
    elif key in RECORD_FIELDS:
        return lambda rec: rec.get(key, _MISSING)
    else:
        path = [key]

    def get(rec: Mapping[str, Any]) -> Any:
        node: Any = rec.get("metadata") or {}
        for part in path:
            if not isinstance(node, Mapping) or part not in node:
                return _MISSING
            node = node[part]
        return node

    return get


def _compile_field(key: str, value: Any, where: str) -> Predicate:
    get = _getter(key)
    is_time = key in TIME_FIELDS
    if isinstance(value, str) and value == "*":
        return lambda rec: get(rec) not in (_MISSING, None)
    if not isinstance(value, Mapping):
        return _op_predicate("eq", get, _operand("eq", value, key, is_time))
    if not value:
        raise InvalidInput(f"{where}: field {key!r} has an empty operator object")
    preds = []
    for op, operand in value.items():
        name = op[1:] if isinstance(op, str) and op.startswith("$") else op
        if name not in OPERATORS:
            raise InvalidInput(
                f"unknown filter operator {op!r} on {key!r}; supported: {', '.join(OPERATORS)}"
            )
        preds.append(_op_predicate(name, get, _operand(name, operand, key, is_time)))
    if len(preds) == 1:
        return preds[0]
    return lambda rec: all(p(rec) for p in preds)


def _operand(op: str, operand: Any, key: str, is_time: bool) -> Any:
    if op in ("in", "nin"):
        if not isinstance(operand, list | tuple | set | frozenset):
            raise InvalidInput(f"operator {op!r} on {key!r} needs a list")
        items = list(operand)
        return [to_timestamp(v, what=key) for v in items] if is_time else items
    if op == "icontains":
        if not isinstance(operand, str):
            raise InvalidInput(f"operator 'icontains' on {key!r} needs a string")
        return operand.casefold()
    if op in ("gt", "gte", "lt", "lte"):
        if is_time:
            return to_timestamp(operand, what=key)
        if isinstance(operand, bool) or not isinstance(operand, int | float | str):
            raise InvalidInput(f"operator {op!r} on {key!r} needs a number or a string")
        return operand
    if is_time and op in ("eq", "ne") and operand is not None:
        return to_timestamp(operand, what=key)
    return operand


def _comparable(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return False
    return (isinstance(a, int | float) and isinstance(b, int | float)) or (
        isinstance(a, str) and isinstance(b, str)
    )


def _op_predicate(op: str, get: Callable[[Mapping[str, Any]], Any], operand: Any) -> Predicate:
    def eq(v: Any) -> bool:
        if isinstance(v, bool) != isinstance(operand, bool):
            return False
        return bool(v == operand)

    def test(rec: Mapping[str, Any]) -> bool:
        v = get(rec)
        if v is _MISSING:
            return op in ("ne", "nin")
        if op == "eq":
            return eq(v)
        if op == "ne":
            return not eq(v)
        if op in ("in", "nin"):
            values = v if isinstance(v, list) else [v]
            hit = any(x == o and isinstance(x, bool) == isinstance(o, bool)
                      for x in values for o in operand)
            return hit if op == "in" else not hit
        if op == "contains":
            if isinstance(v, str):
                return isinstance(operand, str) and operand in v
            if isinstance(v, list):
                return operand in v
            return False
        if op == "icontains":
            if isinstance(v, str):
                return operand in v.casefold()
            if isinstance(v, list):
                return any(isinstance(x, str) and x.casefold() == operand for x in v)
            return False
        if not _comparable(v, operand):
            return False
        if op == "gt":
            return bool(v > operand)
        if op == "gte":
            return bool(v >= operand)
        if op == "lt":
            return bool(v < operand)
        return bool(v <= operand)

    return test
