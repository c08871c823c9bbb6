"""The checks of archive records (``validate_records``): every problem of every record is collected and named by
record index, ASIN and field, so that a broken archive can be fixed in one pass; ``archive`` reads and writes
the archives these records come from."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from ..contract import is_task_id
from ..errors import DataError
from .records import Instruction, Product

MAX_REPORTED_PROBLEMS = 20
MAX_RECORD_DEPTH = 32
"""Deepest nesting of objects/arrays a record may have (real records: 5); deeper ones would overflow the
recursion of every later copy or dump of the record."""


class _Problems:
    """Collects validation problems; raises one DataError that lists them."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.items: list[str] = []

    def add(self, index: int, asin: object, field: str, message: str) -> None:
        self.items.append(f"record {index} (asin {asin!r}) field {field!r}: {message}")

    def raise_if_any(self) -> None:
        if not self.items:
            return
        if len(self.items) == 1:  # one problem: one line
            raise DataError(f"{self.source}: validation problem: {self.items[0]}", code="archive")
        shown = self.items[:MAX_REPORTED_PROBLEMS]
        more = len(self.items) - len(shown)
        tail = f"\n  ... and {more} more" if more else ""
        raise DataError(
            f"{self.source}: {len(self.items)} validation problem(s):\n  " + "\n  ".join(shown) + tail, code="archive"
        )


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(float(value))


def _is_price(value: object) -> bool:
    return _is_number(value) and float(value) >= 0  # type: ignore[arg-type]


def _is_shallow_and_encodable(record: object) -> bool:
    """Fast check (level by level, no paths): nesting within MAX_RECORD_DEPTH and every key and string
    writable as UTF-8. Only when it fails does :func:`_unencodable_or_too_deep` look for the field."""
    level: list[Any] = [record]
    depth = 0
    texts: list[Any] = []
    while level:
        depth += 1
        if depth > MAX_RECORD_DEPTH + 1:
            return False
        deeper: list[Any] = []
        for container in level:
            values: Any = container
            if type(container) is dict:
                texts.extend(container)
                values = container.values()
            for value in values:
                kind = type(value)
                if kind is str:
                    texts.append(value)
                elif kind is dict or kind is list:
                    deeper.append(value)
        level = deeper
    try:
        "".join(texts).encode("utf-8")
    except (UnicodeEncodeError, TypeError):  # TypeError: a non-string key (not from JSON): look closer
        return False
    return True


def _unencodable_or_too_deep(record: object) -> tuple[str, str] | None:
    """(field path, problem) for the first string that cannot be written as UTF-8 (a lone surrogate from a
    ``\\ud800`` escape) or the first value nested deeper than MAX_RECORD_DEPTH; None when the record is fine.

    Iterative, so that a hostile record cannot exhaust the interpreter's recursion.
    """
    stack: list[tuple[object, str, int]] = [(record, "", 0)]
    while stack:
        value, path, depth = stack.pop()
        if isinstance(value, str):
            if not value.isascii():
                try:
                    value.encode("utf-8")
                except UnicodeEncodeError as exc:
                    return path or "<record>", f"lone surrogate U+{ord(value[exc.start]):04X} at character {exc.start}"
            continue
        if not isinstance(value, (dict, list)):
            continue
        if depth >= MAX_RECORD_DEPTH:
            return path or "<record>", f"nested deeper than {MAX_RECORD_DEPTH} levels"
        if isinstance(value, dict):
            for key, item in reversed(list(value.items())):
                child = f"{path}.{key}" if path else str(key)
                if isinstance(key, str) and not key.isascii():
                    try:
                        key.encode("utf-8")
                    except UnicodeEncodeError:
                        return path or "<record>", f"key {key!r} holds a lone surrogate"
                stack.append((item, child, depth + 1))
        else:
            for position in range(len(value) - 1, -1, -1):
                stack.append((value[position], f"{path}[{position}]", depth + 1))
    return None


def _is_str_list(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _check_options(index: int, asin: object, options: object, problems: _Problems) -> None:
    if options is None:
        return
    if not isinstance(options, Mapping):
        problems.add(index, asin, "customization_options", "must be an object mapping axis → list of entries")
        return
    for axis, entries in options.items():
        if entries is None:
            continue
        field = f"customization_options.{axis}"
        if not isinstance(entries, list):
            problems.add(index, asin, field, "must be a list of option entries")
            continue
        for position, entry in enumerate(entries):
            if not isinstance(entry, Mapping):
                problems.add(index, asin, f"{field}[{position}]", "must be an object with a 'value'")
            elif not isinstance(entry.get("value"), str):
                problems.add(index, asin, f"{field}[{position}].value", "missing or not a string")
            elif entry.get("price") is not None and not _is_price(entry["price"]):
                problems.add(index, asin, f"{field}[{position}].price", "must be a finite number ≥ 0 or null")


def _instruction(
    index: int, asin: object, position: int, raw: object, has_persona: bool, problems: _Problems
) -> Instruction | None:
    field = f"instructions[{position}]"
    if not isinstance(raw, Mapping):
        problems.add(index, asin, field, "must be an object")
        return None
    ok = True
    text = raw.get("instruction")
    if not isinstance(text, str) or not text.strip():
        problems.add(index, asin, f"{field}.instruction", "missing or not a non-empty string")
        ok = False
    simple = raw.get("instruction_simple")
    if simple is not None and not isinstance(simple, str):
        problems.add(index, asin, f"{field}.instruction_simple", "must be a string or null")
        ok = False
    elif bool(simple) != has_persona:
        detail = "present without a user_persona" if simple else "missing although the product has a user_persona"
        problems.add(index, asin, f"{field}.instruction_simple", detail)
        ok = False
    attributes = raw.get("attributes", [])
    if not _is_str_list(attributes):
        problems.add(index, asin, f"{field}.attributes", "must be a list of strings")
        ok = False
    options = raw.get("instruction_options", [])
    if options is None:
        options = []
    if not _is_str_list(options):
        problems.add(index, asin, f"{field}.instruction_options", "must be a list of strings")
        ok = False
    price_upper = raw.get("price_upper")
    if price_upper == "":
        price_upper = None
    if price_upper is not None and (not _is_number(price_upper) or float(price_upper) < 0):
        problems.add(index, asin, f"{field}.price_upper", "must be a finite number ≥ 0 or null")
        ok = False
    task_id = raw.get("task_id")
    if task_id is not None and (not is_task_id(task_id) or task_id < 0):
        problems.add(index, asin, f"{field}.task_id", "must be a non-negative integer")
        ok = False
    task_uid = raw.get("task_uid")
    if task_uid is not None and not isinstance(task_uid, str):
        problems.add(index, asin, f"{field}.task_uid", "must be a string")
        ok = False
    instruction_index = raw.get("instruction_index", position)
    if not isinstance(instruction_index, int) or isinstance(instruction_index, bool):
        problems.add(index, asin, f"{field}.instruction_index", "must be an integer")
        ok = False
    if not ok:
        return None
    return Instruction(
        instruction=text,  # type: ignore[arg-type]
        instruction_simple=simple or None,
        attributes=tuple(attributes),
        instruction_options=tuple(options),
        price_upper=None if price_upper is None else float(price_upper),
        task_id=task_id,
        task_uid=task_uid,
        instruction_index=instruction_index,
    )


def _fields_ok(index: int, asin: object, record: Mapping[str, Any], problems: _Problems) -> bool:
    """The product fields' types and values (every field but ``asin`` and ``instructions``), each problem added."""
    ok = True
    for field in ("title", "shop_name", "category"):
        if not isinstance(record.get(field), str):
            problems.add(index, asin, field, "missing or not a string")
            ok = False
    if not _is_str_list(record.get("attribute")):
        problems.add(index, asin, "attribute", "missing or not a list of strings")
        ok = False
    images = record.get("images")
    if not isinstance(images, list) or not images or not all(isinstance(item, str) for item in images):
        problems.add(index, asin, "images", "missing or not a non-empty list of strings")
        ok = False
    pricing = record.get("pricing")
    if pricing is not None and (not isinstance(pricing, list) or not all(_is_price(p) for p in pricing)):
        problems.add(index, asin, "pricing", "must be a list of finite numbers ≥ 0")
        ok = False
    elif pricing and all(float(p) == 0 for p in pricing):
        problems.add(index, asin, "pricing", "only zero prices: a product must have a price above 0")
        ok = False
    product_category = record.get("product_category", "")
    if product_category is not None and not isinstance(product_category, str):
        problems.add(index, asin, "product_category", "must be a string")
        ok = False
    for field in ("full_description",):
        if record.get(field) is not None and not isinstance(record.get(field), str):
            problems.add(index, asin, field, "must be a string")
            ok = False
    bullets = record.get("small_description")
    if bullets is not None and not isinstance(bullets, str) and not _is_str_list(bullets):
        problems.add(index, asin, "small_description", "must be a string or a list of strings")
        ok = False
    _check_options(index, asin, record.get("customization_options"), problems)
    persona = record.get("user_persona")
    if persona is not None and not isinstance(persona, Mapping):
        problems.add(index, asin, "user_persona", "must be an object or null")
        ok = False
    spi = record.get("source_product_index")
    if spi is not None and (not isinstance(spi, int) or isinstance(spi, bool) or spi < 0):
        problems.add(index, asin, "source_product_index", "must be a non-negative integer")
        ok = False
    return ok


def _instructions(
    index: int, asin: object, raw_instructions: object, persona: bool, seen_task_ids: dict[int, int], problems: _Problems
) -> tuple[list[Instruction], bool]:
    """A record's instructions, each checked (task ids unique across the records so far: ``seen_task_ids``), and
    whether all were valid."""
    ok = True
    instructions: list[Instruction] = []
    if not isinstance(raw_instructions, list) or not raw_instructions:
        problems.add(index, asin, "instructions", "missing or not a non-empty list")
        ok = False
    else:
        for position, raw in enumerate(raw_instructions):
            item = _instruction(index, asin, position, raw, persona, problems)
            if item is None:
                ok = False
                continue
            if item.task_id is not None:
                if item.task_id in seen_task_ids:
                    problems.add(
                        index,
                        asin,
                        f"instructions[{position}].task_id",
                        f"duplicate task_id {item.task_id} (first seen at record {seen_task_ids[item.task_id]})",
                    )
                    ok = False
                else:
                    seen_task_ids[item.task_id] = index
            instructions.append(item)
    return instructions, ok


def validate_records(records: Sequence[object], *, source: str = "archive", start: int = 0) -> list[Product]:
    """Validate archive records and return typed products; raises DataError listing every problem.

    ``start`` is the archive index of ``records[0]`` (a chunk of a streamed archive): indices in messages and
    ``Product.index`` count from it.
    """
    problems = _Problems(source)
    products: list[Product] = []
    seen_asins: dict[str, int] = {}
    seen_task_ids: dict[int, int] = {}
    for index, record in enumerate(records, start):
        if not isinstance(record, Mapping):
            problems.add(index, None, "<record>", f"must be an object, got {type(record).__name__}")
            continue
        asin = record.get("asin")
        ok = True
        broken = None if _is_shallow_and_encodable(record) else _unencodable_or_too_deep(record)
        if broken is not None:
            problems.add(index, asin if isinstance(asin, str) and asin.isprintable() else None, *broken)
            continue  # the other checks could trip over the same value
        if not isinstance(asin, str) or not asin.strip():
            problems.add(index, asin, "asin", "missing or not a non-empty string")
            ok = False
        elif asin in seen_asins:
            problems.add(index, asin, "asin", f"duplicate ASIN (first seen at record {seen_asins[asin]})")
            ok = False
        else:
            seen_asins[asin] = index
        ok = _fields_ok(index, asin, record, problems) and ok
        pricing, product_category = record.get("pricing"), record.get("product_category", "")
        persona, spi = record.get("user_persona"), record.get("source_product_index")
        instructions, instructions_ok = _instructions(index, asin, record.get("instructions"), bool(persona),
                                                      seen_task_ids, problems)
        ok = instructions_ok and ok
        if not ok:
            continue
        products.append(
            Product(
                index=index,
                asin=asin,  # type: ignore[arg-type]
                title=record["title"],
                shop_name=record["shop_name"],
                category=record["category"],
                product_category=product_category or "",
                pricing=tuple(float(p) for p in (pricing or [])),
                attributes=tuple(record["attribute"]),
                user_persona=persona or None,
                instructions=tuple(instructions),
                source_product_index=spi,
                raw=record,
            )
        )
    problems.raise_if_any()
    return products
