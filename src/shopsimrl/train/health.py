"""Batch health checks every adapter reports: the protocol-error rate and its 100 % alarm.

A batch in which every model turn was a protocol error trains on reward 0 alone (the template renders a tool
call the project cannot read, or none at all). That is never silent: each adapter logs the rate and a warning
metric that is 1.0 exactly when the rate is 100 % (``shop/protocol_error_rate``, ``shop/protocol_error_alarm``
in TRL; ``shopsim_protocol_error_rate`` per verl row and a log warning; the same log warning from slime's reward
post-process).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

log = logging.getLogger("shopsimrl.train")
RATE_KEY, ALARM_KEY = "shop/protocol_error_rate", "shop/protocol_error_alarm"


def turn_counts(steps: Iterable[Mapping[str, Any]]) -> tuple[int, int]:
    """(model turns, turns that were protocol errors) of one episode's steps."""
    turns = errors = 0
    for step in steps:
        if "sampled_tokens" not in step:  # a context-overflow step: no model turn
            continue
        turns += 1
        errors += bool(step.get("protocol_error"))
    return turns, errors


def protocol_error_rate(counts: Sequence[tuple[int, int]]) -> float:
    """Protocol errors over model turns of a batch (0.0 when no turn was sampled)."""
    turns = sum(t for t, _ in counts)
    return sum(e for _, e in counts) / turns if turns else 0.0


def batch_health(counts: Sequence[tuple[int, int]], where: str) -> dict[str, float]:
    """The rate and the alarm metric of one batch; logs a warning when every turn was a protocol error."""
    rate = protocol_error_rate(counts)
    alarm = float(bool(counts) and sum(t for t, _ in counts) > 0 and rate >= 1.0)
    if alarm:
        log.warning("%s: every model turn of this batch was a protocol error (reward 0 throughout): the chat "
                    "template's tool-call format is not one the project reads, or the model never calls a tool",
                    where)
    return {RATE_KEY: rate, ALARM_KEY: alarm}
