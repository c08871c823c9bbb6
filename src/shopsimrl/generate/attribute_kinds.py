"""Attribute kinds, so that attribute lists in requests read as Chinese (issue 41 item 4).

Joined with 和/又/而且/、 whatever they are, attributes read wrongly (``送礼和压榨的食用油``). A property
(压榨, 静音) is an adjective; a use (送礼, 户外, 家用) or an audience (学生, 幼犬, 男女通用) is a purpose, said as one
(``适合送礼``, ``送礼用``) and listed after the properties with a 、: ``压榨、适合送礼的食用油``. The table is
``attribute_kinds`` in ``vocab/text.json``; :func:`odd_join_pattern` finds the joins it forbids (``text_check``).
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

PROPERTY = "property"
PURPOSE_KINDS = ("use", "audience")
JOINERS = ("和", "又", "而且")
"""The joiners that bind two adjectives; a purpose is never joined by them to a property."""


def kind_of(attribute: str, text: Mapping[str, Any]) -> str:
    """``use``, ``audience`` or ``property`` (every attribute the table does not name)."""
    table: Mapping[str, Any] = text["attribute_kinds"]
    for kind in PURPOSE_KINDS:
        if attribute in table[kind]["bare"] or attribute in table[kind]["formed"]:
            return kind
    return PROPERTY


def purpose_form(attribute: str, form: str, text: Mapping[str, Any], context: str = "") -> str:
    """A purpose as a request says it: a bare one (送礼) as ``适合送礼``/``送礼用``; a paraphrase or a formed one
    (家用, 老少皆宜) as it is. The form is chosen by a hash of ``context`` (the whole list), not by a draw, so the
    generator's streams, and every later task, are not shifted by it."""
    table: Mapping[str, Any] = text["attribute_kinds"]
    kind = kind_of(attribute, text)
    if form != attribute or kind == PROPERTY or attribute not in table[kind]["bare"]:
        return form
    forms: list[str] = table["bare_forms"][kind]
    return forms[zlib.crc32(f"{context}|{attribute}".encode()) % len(forms)].format(a=attribute)


def split_by_kind(
    attributes: Sequence[str], forms: Sequence[str], text: Mapping[str, Any]
) -> tuple[list[str], list[str]]:
    """(property forms, purpose forms) in the given order; purposes already said as purposes."""
    properties: list[str] = []
    purposes: list[str] = []
    context = "、".join(forms)
    for attribute, form in zip(attributes, forms, strict=True):
        if kind_of(attribute, text) == PROPERTY:
            properties.append(form)
        else:
            purposes.append(purpose_form(attribute, form, text, context))
    return properties, purposes


def _alternation(words: set[str]) -> str:
    return "|".join(re.escape(w) for w in sorted(words, key=lambda w: (-len(w), w)) if w)


@lru_cache(maxsize=1)
def odd_join_pattern() -> re.Pattern[str]:
    """A purpose form joined by 和/又/而且 to a property form, on either side (``送礼和压榨``, ``压榨又适合送礼``)."""
    from .vocabulary import load_vocabulary

    vocab = load_vocabulary()
    table: Mapping[str, Any] = vocab.text["attribute_kinds"]
    phrases: Mapping[str, list[str]] = vocab.paraphrases["phrases"]
    attributes = {a for leaf in vocab.leaves for a in leaf.facets}
    purposes: set[str] = set()
    properties: set[str] = set()
    for attribute in attributes:
        forms = {attribute, *phrases.get(attribute, ())}
        kind = kind_of(attribute, vocab.text)
        if kind == PROPERTY:
            properties |= forms
        else:
            purposes |= forms | {f.format(a=attribute) for f in table["bare_forms"][kind]}
    properties -= purposes
    purpose, prop, joiner = _alternation(purposes), _alternation(properties), "|".join(JOINERS)
    return re.compile(f"(?:{purpose})(?:{joiner})(?:{prop})|(?:{prop})(?:{joiner})(?:{purpose})")
