"""Decidability: is every scored requirement of a persona task decided by what the agent can see?

Without this check a persona task can have no single right answer from public information (the persona likes
two of the gold's option values, the budget is only in the private full instruction, a cue is listed under
several attributes), so the reward would pay for guessing. :func:`task_problems` reads the short request and
the public persona the way a careful shopper would, and for each requirement the reward scores asks:

* an attribute: named verbatim, by a paraphrase or by an implied situation that belongs to it alone among the
  leaf's attributes, with no exclusive sibling (成犬 for 幼犬) named anywhere; the gold then scores r_att = 1
  for it under the reward's own ``attribute_reward``;
* an option value: exactly one of the values the gold product offers on that axis is named (longest first, so
  ``XL`` is no ``L``; small counts also in words, 两个装; an end of a priced axis may be described, 要最大的那档),
  and selecting that entry scores r_option = 1 under the reward's own ``option_reward``;
* a budget: the ceiling the goal carries is what the budget parser reads from the request or a recent search.

The generator draws a persona again until the list of problems is empty; ``data stats`` runs the same check on
a prepared catalog and reports the share of decidable persona tasks.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any

from ..budget import parse_budget
from ..env import attribute_reward, option_reward
from .bundles import described_match, is_bundle_axis
from .vocabulary import Leaf, Vocabulary, load_vocabulary

_DESCRIBED_WORDS = ("最小的那档", "最小的那个", "最便宜的那个", "最便宜的那档", "最低的那档", "最大的那档", "最大的那个",
                    "最高的那档", "最贵的那档", "最贵的那个", "最高配的那档", "小一点的", "里选小的那个",
                    "便宜点的那个", "里选便宜的那个", "大一点的那个", "里选大的那个", "贵一点的那个", "里选贵的那个")
_COUNTED = re.compile(r"^(\d{1,2})(?=\D)")


def _texts(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value] if value else []
    if isinstance(value, Mapping):
        return [text for item in value.values() for text in _texts(item)]
    if isinstance(value, (list, tuple)):
        return [text for item in value for text in _texts(item)]
    return []


def public_evidence(simple: str, persona: Mapping[str, Any]) -> tuple[str, list[str]]:
    """(the text a requirement may be named in, the recent searches): request, attribute preferences, searches."""
    interests = persona.get("兴趣偏好") if isinstance(persona.get("兴趣偏好"), Mapping) else {}
    prefs = interests.get("商品属性偏好") if isinstance(interests, Mapping) else None
    liked = [
        text for key, value in (prefs.items() if isinstance(prefs, Mapping) else ()) if key != "价格区间"
        for text in _texts(value)
    ]
    behaviour = persona.get("行为特征") if isinstance(persona.get("行为特征"), Mapping) else {}
    searches = _texts(behaviour.get("最近14天搜索关键词")) if isinstance(behaviour, Mapping) else []
    return " | ".join([simple, *liked, *searches]), searches


@lru_cache(maxsize=4096)
def _pattern(value: str) -> re.Pattern[str]:
    """``value`` as a word: an ASCII letter or digit at its edge must not continue (``L`` in ``XL``, 30 in 300)."""
    head = r"(?<![0-9A-Za-z.])" if value[:1].isascii() and value[:1].isalnum() else ""
    tail = r"(?![0-9A-Za-z])" if value[-1:].isascii() and value[-1:].isalnum() else ""
    return re.compile(head + re.escape(value) + tail)


def named_values(text: str, values: Iterable[str], spoken_numbers: Sequence[str] = ()) -> set[str]:
    """The ``values`` that ``text`` names, longest first (a longer value's mention hides the shorter inside it)."""
    found: set[str] = set()
    for value in sorted(set(values), key=len, reverse=True):
        forms = [value]
        match = _COUNTED.match(value)
        if match and 1 <= int(match.group(1)) < len(spoken_numbers):
            forms.append(spoken_numbers[int(match.group(1))] + value[match.end():])
        for form in forms:
            pattern = _pattern(form)
            if pattern.search(text):
                found.add(value)
                text = pattern.sub("■", text)
    return found


def plain_of(entry: str, axis_values: Sequence[str]) -> str:
    """The leaf's plain value inside a seller string (``黑色`` in ``黑色【现货速发】``), longest first."""
    inside = [value for value in axis_values if value in entry]
    return max(inside, key=len) if inside else entry


@lru_cache(maxsize=8)
def _cue_fragments(vocab_id: int) -> dict[str, list[tuple[str, ...]]]:
    del vocab_id
    table: dict[str, Any] = load_vocabulary().personas["implied_cues"]
    return {
        attribute: [tuple(part.strip() for part in str(cue).split("{noun}") if part.strip()) for cue in cues]
        for attribute, cues in table.items()
        if not attribute.startswith("_") and isinstance(cues, list)
    }


def _attribute_problem(
    attribute: str, text: str, searches: list[str], record: Mapping[str, Any], leaf: Leaf, vocab: Vocabulary
) -> str | None:
    own = leaf.all_attributes()
    slot = next((s for s in leaf.slots if attribute in s.values), None)
    rivals = [v for v in (slot.values if slot else ()) if v != attribute and v not in attribute]
    if named_values(text, [attribute, *rivals]) - {attribute}:
        return f"attribute {attribute}: a rival of its slot is named"
    decided = attribute in named_values(text, [attribute])
    if not decided:
        phrases: dict[str, list[str]] = vocab.paraphrases["phrases"]
        for phrase in phrases.get(attribute, ()):
            if phrase in text and not any(phrase in phrases.get(other, ()) for other in own if other != attribute):
                decided = True
                break
    if not decided:
        cues = _cue_fragments(id(vocab))
        for fragments in cues.get(attribute, ()):
            shared = any(fragments in cues.get(other, ()) for other in own if other != attribute)
            if not shared and any(all(part in search for part in fragments) for search in searches):
                decided = True
                break
    if not decided:
        return f"attribute {attribute}: no public evidence"
    if attribute_reward(record, [attribute])[0] != 1.0:
        return f"attribute {attribute}: the gold does not score it"
    return None


def _option_problem(
    value: str, text: str, simple: str, record: Mapping[str, Any], leaf: Leaf, vocab: Vocabulary
) -> str | None:
    options: Mapping[str, Any] = record.get("customization_options") or {}
    axis = next((name for name, entries in options.items() if any(e.get("value") == value for e in entries)), None)
    if axis is None:
        return f"option {value}: not offered by the gold"
    entries = [str(e.get("value")) for e in options[axis]]
    if is_bundle_axis(entries):  # the contents are described; exactly one value may hold those parts
        if any(entry != value and entry in text for entry in entries):
            return f"option {value}: another {axis} value is named"
        matched = described_match(text, entries)
        if not matched and axis in simple and any(word in simple for word in _DESCRIBED_WORDS):
            return None
        if len(matched) != 1:
            return f"option {value}: the described parts fit {len(matched)} of the gold's {axis} values"
        if option_reward(matched, [value])[0] != 1.0:
            return f"option {value}: the described parts name {matched[0]}"
        return None
    axis_values = [v for a in leaf.axes if a.name == axis for v in a.values]
    plains = {entry: plain_of(entry, axis_values) for entry in entries}
    named = named_values(text, [*axis_values, *plains.values()], vocab.text["spoken_numbers"])
    chosen = [entry for entry, plain in plains.items() if plain in named]
    if not chosen and axis in simple and any(word in simple for word in _DESCRIBED_WORDS):
        return None  # an end of a priced axis, described (规格要最大的那档)
    if len(chosen) != 1:
        return f"option {value}: {len(chosen)} of the gold's {axis} values are named"
    if option_reward(chosen, [value])[0] != 1.0:
        return f"option {value}: the named value {chosen[0]} is another one"
    return None


def task_problems(
    simple: str,
    persona: Mapping[str, Any],
    record: Mapping[str, Any],
    attributes: Sequence[str],
    options: Sequence[str],
    ceiling: float | None,
    leaf: Leaf,
    vocab: Vocabulary,
) -> list[str]:
    """What keeps a persona task from being decided by public information (empty: decidable)."""
    text, searches = public_evidence(simple, persona)
    problems = [p for a in attributes if (p := _attribute_problem(a, text, searches, record, leaf, vocab))]
    problems += [p for v in options if (p := _option_problem(v, text, simple, record, leaf, vocab))]
    if ceiling is not None and parse_budget(simple) != ceiling and all(parse_budget(s) != ceiling for s in searches):
        problems.append("budget: the ceiling is in no public text")
    return problems


def goal_problems(goal: Mapping[str, Any], record: Mapping[str, Any], vocab: Vocabulary | None = None) -> list[str] | None:
    """``task_problems`` for a prepared goal and its gold record; None when the record's leaf is not generated."""
    vocab = vocab or load_vocabulary()
    leaves = {leaf.name: leaf for leaf in vocab.leaves}
    leaf = leaves.get(str(record.get("product_category")))
    if leaf is None:
        return None
    return task_problems(
        str(goal.get("instruction_simple") or ""), goal.get("user_persona") or {}, record,
        [str(a) for a in goal.get("attributes") or ()], [str(v) for v in goal.get("goal_options") or ()],
        goal.get("price_upper"), leaf, vocab,
    )


def catalog_decidability(goals: Mapping[int, Mapping[str, Any]], record_of: Any) -> dict[str, Any]:
    """The share of persona tasks decidable from public information (``data stats``), with the first problems.

    ``record_of(asin)`` gives a gold record; tasks whose leaf is not a generated one are not counted.
    """
    vocab = load_vocabulary()
    checked = decidable = 0
    examples: list[dict[str, Any]] = []
    for task_id in sorted(goals):
        goal = goals[task_id]
        if not goal.get("user_persona"):
            continue
        problems = goal_problems(goal, record_of(str(goal["asin"])), vocab)
        if problems is None:
            continue
        checked += 1
        decidable += not problems
        if problems and len(examples) < 20:
            examples.append({"task_id": task_id, "problems": problems})
    return {
        "decidable_share": decidable / checked if checked else None,
        "decidable_checked_tasks": checked,
        "undecidable_examples": examples,
    }
