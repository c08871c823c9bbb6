"""Held-out phrasing: part of every phrase table is reserved for the persona tasks of val/test users.

Why: if every cue, paraphrase and request frame of a test persona also appeared in train personas, a policy
trained on train tasks could memorise the tables instead of reading the evidence. A form is held out
when a stable hash of its text says so (about one in three, :data:`HELD_OUT_MODULUS`). Train users never draw a
held-out form (a table left without train forms gives them other evidence), held-out users draw the held-out
forms of a table when it has any, so a val/test task's held-out phrasing is never seen in a train persona.
Which users are held out is known before any text is drawn (:func:`predicted_held_out_users`): a generated
persona task's split group is its user (asins and texts are unique), and task ids follow the archive layout.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..catalog.splits import PersonaTask, build_persona_splits
from ..errors import DataError
from .rng import pick

HELD_OUT_MODULUS = 3


def held_out_form(form: str) -> bool:
    """Whether ``form`` belongs to the held-out side of its table (a stable hash, the same in every process)."""
    return hashlib.sha256(form.encode("utf-8")).digest()[0] % HELD_OUT_MODULUS == 0


def split_forms(forms: Sequence[str]) -> tuple[list[str], list[str]]:
    """(train forms, held-out forms) of a table; the side is the form's own (a form listed in two tables is on
    the same side in both), so a table may have no train form at all (its train tasks use other evidence)."""
    held = [form for form in forms if held_out_form(form)]
    train = [form for form in forms if not held_out_form(form)]
    return train, held


@dataclass
class Phrasing:
    """The side of the tables one persona task draws from, and the forms it drew (for the realism figures)."""

    held_out: bool = False
    used: list[str] = field(default_factory=list)
    split_used: int = 0
    """How many of ``used`` came from a split table (held-out forms for a held-out task)."""

    def allowed(self, forms: Sequence[str], table: Sequence[str] | None = None) -> list[str]:
        """The ``forms`` this task may use; ``table`` is the whole table they were filtered from (it decides the
        split). A train task gets none of a table's held-out forms (possibly nothing); a held-out task gets the
        held-out ones, or the train ones when its filter left no held-out form."""
        train, held = split_forms(table if table is not None else forms)
        if not held:
            return list(forms)
        mine = [form for form in forms if form in (held if self.held_out else train)]
        if not mine and self.held_out:
            return [form for form in forms if form in train]
        return mine

    def pick(self, rng: random.Random, forms: Sequence[str], table: Sequence[str] | None = None) -> str:
        """One of :meth:`allowed` (which must not be empty), recorded in ``used``."""
        options = self.allowed(forms, table)
        if not options:
            raise ValueError(f"no form of {list(forms)!r} is allowed on this side")
        if split_forms(table if table is not None else forms)[1]:
            self.split_used += 1
        chosen = str(pick(rng, options))
        self.used.append(chosen)
        return chosen


def pick_form(rng: random.Random, forms: Sequence[str], phrasing: Phrasing | None) -> str | None:
    """``phrasing.pick``, or any form where no persona task is being written (full instructions, confusers);
    None when this side of the table is empty."""
    if phrasing is None:
        return str(pick(rng, list(forms)))
    return phrasing.pick(rng, forms) if phrasing.allowed(forms) else None


def predicted_held_out_users(
    task_ids: Sequence[int], owners: Sequence[str], *, test_size: int | None = None, val_size: int | None = None
) -> set[str]:
    """The users whose persona tasks the default persona split puts into val or test (prepare's own function).

    ``task_ids[i]`` is the prepared task id of the i-th persona task and ``owners[i]`` its user id; only the
    user links the tasks of a generated catalog, so the split's groups are the users.
    """
    tasks = [PersonaTask(task_id, "", "", "", {"用户ID": owner}) for task_id, owner in zip(task_ids, owners, strict=True)]
    if not tasks:
        return set()
    try:
        splits = build_persona_splits(tasks, test_size=test_size, val_size=val_size)
    except DataError as exc:  # a catalog too small for the default split sizes: prepare will say so
        if exc.code != "invalid_split":
            raise
        return set()
    held_ids = {task_id for name in ("test", "val") for task_id in splits["splits"][name]["task_ids"]}
    return {owner for task_id, owner in zip(task_ids, owners, strict=True) if task_id in held_ids}
