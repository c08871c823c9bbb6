"""Amount tokens and their values: Arabic, Chinese and mixed numerals (docs/contract.md#budget-parser).

Budget phrases write amounts in many ways: ``2199``, ``1,000``, ``2.5k``, ``2w``, ``三千``, ``一千八``
(shorthand for 1800), ``两百五``, ``4千4百``, ``1万2`` (12000), ``1.1万``, ``一万零四百``, ``百`` (as in
``百元内``). This module finds such tokens and converts them to floats; it knows nothing about budgets.
"""

from __future__ import annotations

import math
import re

CHINESE_DIGITS: dict[str, int] = {
    "零": 0,
    "〇": 0,
    "一": 1,
    "二": 2,
    "两": 2,
    "三": 3,
    "四": 4,
    "五": 5,
    "六": 6,
    "七": 7,
    "八": 8,
    "九": 9,
}
SMALL_UNITS: dict[str, float] = {"十": 10.0, "百": 100.0, "千": 1000.0, "k": 1000.0, "K": 1000.0}
LARGE_UNITS: dict[str, float] = {"万": 1e4, "w": 1e4, "W": 1e4, "亿": 1e8}
CHINESE_NUMERAL_CHARS = "".join(CHINESE_DIGITS) + "十百千万亿"

_ARABIC = r"[0-9]{1,3}(?:,[0-9]{3})+(?:\.[0-9]+)?|[0-9]+(?:\.[0-9]+)?"
_LATIN_SCALE = r"[kKwW](?![A-Za-z])"
AMOUNT_TOKEN = re.compile(
    rf"(?:{_ARABIC}|[{CHINESE_NUMERAL_CHARS}])(?:{_ARABIC}|[{CHINESE_NUMERAL_CHARS}]|{_LATIN_SCALE})*"
)
"""An amount token: numbers, Chinese numeral characters and scale letters, greedily joined."""

_ATOM = re.compile(rf"{_ARABIC}|[{CHINESE_NUMERAL_CHARS}kKwW]")
_DIGIT_PAIR = re.compile(r"^([一二两三四五六七八])([二两三四五六七八九])(?=[十百千万]|$)")


def split_digit_pair(token: str) -> tuple[str, bool]:
    """Reduce a "两三百"-style estimate (two ascending digits before a unit, or alone) to its upper end.

    Returns the token to convert and whether the pair was present: ``八九百`` → (``九百``, True),
    ``三五百`` → (``五百``, True), ``两三`` (as in ``两三块钱``) → (``三``, True). A descending or longer
    run of digits (``二零二四``) is not a pair and is read digit by digit.
    """
    match = _DIGIT_PAIR.match(token)
    if match and CHINESE_DIGITS[match.group(2)] > CHINESE_DIGITS[match.group(1)]:
        return token[1:], True
    return token, False


def longest_numeral(token: str) -> tuple[float, str] | None:
    """The longest leading part of ``token`` that is a numeral, with its value (``950一`` → 950)."""
    atoms = _atoms(token) or []
    for size in range(len(atoms), 0, -1):
        head = "".join(atoms[:size])
        value = numeral_value(head)
        if value is not None:
            return value, head
    return None


def _atoms(token: str) -> list[str] | None:
    atoms = _ATOM.findall(token)
    return atoms if "".join(atoms) == token else None


def _is_single_digit(atom: str) -> bool:
    return atom in CHINESE_DIGITS or (len(atom) == 1 and atom.isdigit())


def numeral_value(token: str) -> float | None:
    """Value of an amount token, or None when it is not a well-formed numeral.

    Rules: a run of Chinese digit characters only is read digit by digit (``二零二四`` → 2024); otherwise
    units multiply the number before them (1 when there is none), ``万``/``亿`` scale everything before
    them that is smaller, and a single trailing digit right after a unit is that unit's shorthand
    (``一千八`` → 1800, ``1万2`` → 12000) unless a ``零`` came before it (``一万零五`` → 10005).
    """
    if not token:
        return None
    atoms = _atoms(token)
    if atoms is None:
        return None
    if len(atoms) > 1 and all(atom in CHINESE_DIGITS for atom in atoms):
        return float("".join(str(CHINESE_DIGITS[atom]) for atom in atoms))
    total = 0.0
    section = 0.0
    pending: float | None = None
    pending_atom = ""
    last_unit: float | None = None
    largest_unit = 0.0
    zero_gap = False
    for atom in atoms:
        if atom in SMALL_UNITS or atom in LARGE_UNITS:
            unit = SMALL_UNITS.get(atom) or LARGE_UNITS[atom]
            if atom in SMALL_UNITS:
                section += (1.0 if pending is None else pending) * unit
            else:
                section += 0.0 if pending is None else pending
                if section == 0.0 and total == 0.0:
                    section = 1.0
                if unit < largest_unit:
                    total += section * unit
                else:
                    total = (total + section) * unit
                    largest_unit = unit
                section = 0.0
            pending = None
            last_unit = unit
            zero_gap = False
            continue
        if atom in ("零", "〇"):
            zero_gap = True
            continue
        if pending is not None:
            return None  # two numbers in a row ("2三"): not a numeral
        value = float(CHINESE_DIGITS[atom]) if atom in CHINESE_DIGITS else float(atom.replace(",", ""))
        pending = value
        pending_atom = atom
    result = total + section
    if pending is not None:
        shorthand = last_unit is not None and not zero_gap and _is_single_digit(pending_atom)
        result += pending * (last_unit / 10.0) if shorthand and last_unit is not None else pending
    return result if math.isfinite(result) else None
