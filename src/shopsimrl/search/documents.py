"""Per-field search documents (docs/contract.md#search-fields, option document ``public-axis-value-v1``).

Only public product facts are indexed: no instructions, goals, descriptions, prices, images or variant ids,
so that search can never leak what the reward checks.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .text import LATIN_TOKEN_PATTERN, normalize_query, search_tokens

#: The indexed fields, in the frozen FTS column order (after ``asin``).
FIELDS = ("title", "brand", "category", "model", "attributes", "options", "bullets")

_MODEL_TOKEN = re.compile(rf"(?<![a-z0-9]){LATIN_TOKEN_PATTERN}(?![a-z0-9])")
_HAS_LETTER = re.compile(r"[a-z]")
_HAS_DIGIT = re.compile(r"[0-9]")


def _first(product: Mapping[str, Any], *keys: str) -> Any:
    """The first truthy value among ``keys`` (the reference's ``a or b or default`` chains)."""
    for key in keys:
        value = product.get(key)
        if value:
            return value
    return None


def flatten(value: Any) -> list[str]:
    """Dicts give key then value (keys in str order), sequences their items, scalars ``str(x)``, None nothing.

    Sets are sorted by ``str`` so that the document never depends on hash order.
    """
    if value is None:
        return []
    if isinstance(value, Mapping):
        out: list[str] = []
        for key in sorted(value, key=str):
            out.append(str(key))
            out.extend(flatten(value[key]))
        return out
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=str) if isinstance(value, (set, frozenset)) else value
        return [text for item in items for text in flatten(item)]
    return [str(value)]


def model_text(title: str) -> str:
    """Model codes of the normalised title: Latin/number tokens holding both a letter and a digit."""
    codes = [
        token
        for token in _MODEL_TOKEN.findall(normalize_query(title))
        if _HAS_LETTER.search(token) and _HAS_DIGIT.search(token)
    ]
    return " ".join(dict.fromkeys(codes))


def _entries(entries: Any) -> list[Any]:
    if entries is None:
        return []
    if isinstance(entries, (set, frozenset)):
        return sorted(entries, key=str)
    if isinstance(entries, (list, tuple)):
        return list(entries)
    return [entries]  # a lone value (not the archive format) counts as one entry, never as its characters


def options_text(product: Mapping[str, Any]) -> str:
    """Axis names and their values only: a price, image or variant id of an entry is never indexed."""
    options = product.get("customization_options")
    if not (isinstance(options, Mapping) and options):
        options = product.get("options")
    if not isinstance(options, Mapping):
        return ""
    parts: list[str] = []
    for axis in sorted(options, key=str):
        name = str(axis).strip()
        if name:
            parts.append(name)
        for entry in _entries(options[axis]):
            value = entry.get("value") if isinstance(entry, Mapping) else entry
            if value is None or value == "":
                continue
            text = str(value).strip()
            if text:
                parts.append(text)
    return " ".join(parts)


def raw_fields(product: Mapping[str, Any]) -> dict[str, str]:
    """The seven fields' raw texts, before tokenisation."""
    title = str(_first(product, "title", "Title") or "")
    return {
        "title": title,
        "brand": str(_first(product, "brand", "shop_name") or ""),
        "category": str(_first(product, "category", "product_category") or ""),
        "model": model_text(title),
        "attributes": " ".join(flatten(_first(product, "attribute", "Attributes") or [])),
        "options": options_text(product),
        "bullets": " ".join(flatten(_first(product, "small_description", "sub_title", "BulletPoints") or [])),
    }


def product_search_fields(product: Mapping[str, Any]) -> dict[str, str]:
    """The seven indexed fields of an archive-format product, each its tokens joined by single spaces."""
    return {name: " ".join(search_tokens(text)) for name, text in raw_fields(product).items()}
