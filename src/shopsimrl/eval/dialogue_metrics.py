"""Dialogue-mode metrics of a run: computed from the traces' step results only, so runs made in
process and over HTTP score alike.

- ``questions_per_episode``: valid ``ask_user`` calls per completed episode;
- ``slot_recall``: slots revealed / slots in the goal, summed over episodes (``final.dialogue``);
- ``purchases_after_incomplete``: episodes that bought after the shopper said the information was not complete
  (the anchor's most common multi-turn buy-now error), with the share of episodes that got such a reply;
- ``unanswered_question_rate``: questions answered with the neutral reply (nothing in the goal matched).

Single-turn runs have no ``dialogue`` block in their traces and get no dialogue metrics.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..contract import PURCHASE
from ..dialogue.replies import NEUTRAL_REPLY, PURCHASE_INCOMPLETE

INCOMPLETE_PREFIX = PURCHASE_INCOMPLETE.split("{", 1)[0]


def episode_dialogue(record: Mapping[str, Any]) -> dict[str, Any] | None:
    """One completed episode's dialogue counts (None for a single-turn trace)."""
    if not isinstance(record.get("dialogue"), Mapping):
        return None
    final = record.get("final") or {}
    raw_state = final.get("dialogue")
    state: Mapping[str, Any] = raw_state if isinstance(raw_state, Mapping) else {}
    replies = [step["dialogue"].get("reply") for step in record.get("steps") or []
               if isinstance(step.get("dialogue"), Mapping) and step["dialogue"].get("valid")]
    told_incomplete = any(isinstance(r, str) and r.startswith(INCOMPLETE_PREFIX) for r in replies)
    return {
        "questions": len(replies),
        "neutral": sum(1 for r in replies if r == NEUTRAL_REPLY),
        "slots_revealed": int(state.get("slots_revealed") or 0),
        "slots_total": int(state.get("slots_total") or 0),
        "told_incomplete": told_incomplete,
        "bought_after_incomplete": told_incomplete and final.get("termination_reason") == PURCHASE,
    }


def dialogue_summary(completed: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The summary's ``dialogue`` block, or None when no completed episode is a dialogue episode."""
    episodes = [e for e in (episode_dialogue(r) for r in completed) if e is not None]
    if not episodes:
        return None
    n = len(episodes)
    questions = sum(e["questions"] for e in episodes)
    revealed = sum(e["slots_revealed"] for e in episodes)
    total = sum(e["slots_total"] for e in episodes)
    told = sum(1 for e in episodes if e["told_incomplete"])
    return {
        "episodes": n,
        "questions": questions,
        "questions_per_episode": questions / n,
        "slot_recall": revealed / total if total else None,
        "slots_revealed": revealed,
        "slots_total": total,
        "episodes_told_incomplete": told,
        "purchases_after_incomplete": sum(1 for e in episodes if e["bought_after_incomplete"]),
        "unanswered_questions": sum(e["neutral"] for e in episodes),
        "unanswered_question_rate": sum(e["neutral"] for e in episodes) / questions if questions else None,
    }
