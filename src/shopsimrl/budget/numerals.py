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


MAX_NUMERAL_ATOMS = 24
"""A token of more atoms is not an amount (a serial number or noise); capping it keeps the scan linear."""


def longest_numeral(token: str) -> tuple[float, str] | None:
    """The longest leading part of ``token`` that is a numeral, with its value (``950一`` → 950).

    One pass over the atoms: each prefix's value comes from the running state of the previous one, so a
    token costs time linear in its length. A token of more than ``MAX_NUMERAL_ATOMS`` atoms gives None.
    """
    atoms = _atoms(token)
    if atoms is None or len(atoms) > MAX_NUMERAL_ATOMS:
        return None
    reader = _Reader()
    best: tuple[float, str] | None = None
    for size, atom in enumerate(atoms, start=1):
        if not reader.feed(atom):
            break
        value = reader.value()
        if value is not None:
            best = value, "".join(atoms[:size])
        elif reader.overflowed():
            break  # an infinite total never becomes finite again
    return best


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
    atoms = _atoms(token) if token else None
    if atoms is None:
        return None
    reader = _Reader()
    for atom in atoms:
        if not reader.feed(atom):
            return None
    return reader.value()


class _Reader:
    """The running state of ``numeral_value`` over a numeral's atoms, readable after every atom."""

    def __init__(self) -> None:
        self.total = 0.0
        self.section = 0.0
        self.pending: float | None = None
        self.pending_atom = ""
        self.last_unit: float | None = None
        self.largest_unit = 0.0
        self.zero_gap = False
        self.count = 0
        self.digit_run: str | None = ""  # the Chinese digits so far while every atom is one, else None

    def feed(self, atom: str) -> bool:
        """Take one more atom; False when the atoms so far can no longer be a numeral (``2三``)."""
        self.count += 1
        if self.digit_run is not None:
            self.digit_run = self.digit_run + str(CHINESE_DIGITS[atom]) if atom in CHINESE_DIGITS else None
        if atom in SMALL_UNITS or atom in LARGE_UNITS:
            self._unit(atom)
            return True
        if atom in ("零", "〇"):
            self.zero_gap = True
            return True
        if self.pending is not None:
            self.pending = float("nan")  # two numbers in a row: only a run of Chinese digits survives
            return self.digit_run is not None
        self.pending = float(CHINESE_DIGITS[atom]) if atom in CHINESE_DIGITS else float(atom.replace(",", ""))
        self.pending_atom = atom
        return True

    def _unit(self, atom: str) -> None:
        unit = SMALL_UNITS.get(atom) or LARGE_UNITS[atom]
        if atom in SMALL_UNITS:
            self.section += (1.0 if self.pending is None else self.pending) * unit
        else:
            self.section += 0.0 if self.pending is None else self.pending
            if self.section == 0.0 and self.total == 0.0:
                self.section = 1.0
            if unit < self.largest_unit:
                self.total += self.section * unit
            else:
                self.total = (self.total + self.section) * unit
                self.largest_unit = unit
            self.section = 0.0
        self.pending = None
        self.last_unit = unit
        self.zero_gap = False

    def overflowed(self) -> bool:
        return not math.isfinite(self.total + self.section)

    def value(self) -> float | None:
        """The value of the atoms fed so far, or None when they are not a finite numeral."""
        if self.count > 1 and self.digit_run is not None:
            return float(self.digit_run)
        result = self.total + self.section
        pending = self.pending
        if pending is not None:
            shorthand = self.last_unit is not None and not self.zero_gap and _is_single_digit(self.pending_atom)
            result += pending * (self.last_unit / 10.0) if shorthand and self.last_unit is not None else pending
        return result if math.isfinite(result) else None
