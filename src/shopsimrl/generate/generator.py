"""Orchestration: the deterministic default catalog, as a raw source archive (docs/contract.md#catalog-archive) and its manifest.

All randomness comes from ``random.Random`` instances seeded with strings derived from the seed (a master
stream for the global layout, one stream per leaf, one for personas); the global RNG is never touched and
no set of strings is iterated, so the same seed and generator version give byte-identical output in any
process. Counts are exact: ``products`` raw products with one instruction each, ``two_axis_products`` of
them with two price-affecting axes (cleaning excludes them), and ``persona_tasks`` persona tasks, all on
kept products; every other kept product carries a standard task.
"""

from __future__ import annotations

import math
import os
import random
from array import array
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ..catalog.splits import normalize_text
from ..errors import DataError
from .amounts import price_amounts
from .confusers import Confuser, add_confusers
from .instructions import Requirements, choose_requirements, full_instruction
from .layout import GeneratorConfig, choose_leaves, split_leaf_sizes, user_group_sizes
from .personas import PersonaTask, persona_task
from .phrasing import predicted_held_out_users
from .products import Brand, ProductDraft, make_brands, make_product
from .rng import pick_many
from .spill import DraftStore, MemoryStore, SpillStore
from .users import User, make_user
from .vocabulary import Leaf, Vocabulary, load_vocabulary

GENERATOR_VERSION = "shopsimrl-catalog-generator-v8.1"
DEFAULT_SEED = 20240521
BRANDS_PER_DOMAIN = 40


@dataclass(frozen=True, slots=True)
class TaskAudit:
    """Private facts of one generated task, for tests and statistics (not part of the archive)."""

    position: int
    asin: str
    leaf: str
    persona: bool
    two_axis: bool
    budget_kind: str
    budget_phrase: str
    ceiling: float | None
    gold_price: float
    dearer_price: float | None
    gold_options: dict[str, str]
    user_id: str | None
    omitted: tuple[str, ...]
    problems: tuple[str, ...] = ()
    """What the decidability check found for a persona task (empty: decidable from public information)."""
    held_out: bool = False
    """The task's user is predicted to fall into the val/test persona split."""
    forms: tuple[str, ...] = ()
    """The table forms (cues, paraphrases, templates) the persona task was written with."""


@dataclass
class GeneratedCatalog:
    records: list[dict[str, Any]]
    audits: list[TaskAudit]
    leaves: list[Leaf]
    leaf_sizes: dict[str, int]
    user_task_counts: dict[str, int] = field(default_factory=dict)
    confusers: list[Confuser] = field(default_factory=list)
    """Cross-leaf confusers (archive positions of the confuser and of the task it confuses)."""



def _unique_full(
    draft: ProductDraft, req: Requirements, text: str, taken: set[str], vocab: Vocabulary, rng: random.Random
) -> str:
    attempt = 0
    while normalize_text(text) in taken:
        attempt += 1
        text = full_instruction(draft, req, vocab, rng)
        if attempt > 6:
            text = text.rstrip("。") + f"，{req.use}用，谢谢" + "！" * (attempt - 6)
    taken.add(normalize_text(text))
    return text


class CatalogStream:
    """The catalog as a stream of (record, audit) in archive order, with bounded memory.

    The layout (leaves, sizes, two-axis and persona slots, archive order, ASINs) is drawn up front and kept
    as small per-product summaries; iterating makes every product leaf by leaf into a draft store (spilled
    to disk unless ``in_memory``), then emits the records in archive order, doing each persona task when its
    position comes up (persona positions are visited in ascending order, as before, so every random stream
    is consumed exactly as when everything was held in memory). A user is dropped after its last task.
    Iterate once; ``user_task_counts`` is complete when the iteration ends.
    """

    def __init__(
        self,
        seed: int = DEFAULT_SEED,
        config: GeneratorConfig | None = None,
        *,
        in_memory: bool = False,
        spill_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        self.seed = seed
        self.config = config = config or GeneratorConfig()
        self.in_memory = in_memory
        self.spill_dir = spill_dir
        self.vocab = vocab = load_vocabulary()
        master = random.Random(f"shopsimrl-generate:{seed}:layout")
        self.leaves = leaves = choose_leaves(vocab, config, master)
        self.sizes = sizes = split_leaf_sizes(config.products, len(leaves), master)
        self.leaf_sizes = {leaf.name: size for leaf, size in zip(leaves, sizes, strict=True)}
        self.user_task_counts: dict[str, int] = {}
        self.confusers: list[Confuser] = []
        total = sum(sizes)
        two_axis_count, persona_count = config.two_axis_count, config.persona_count
        assert two_axis_count is not None and persona_count is not None  # filled in by __post_init__
        two_axis_leaf = [len(leaf.axes) >= 2 for leaf in leaves]
        eligible: list[int] = []
        slot = 0
        for li, size in enumerate(sizes):
            if two_axis_leaf[li]:
                eligible.extend(range(slot, slot + size))
            slot += size
        if two_axis_count > len(eligible):
            raise DataError(
                f"--two-axis-products {two_axis_count} is more than the {len(eligible)} products of leaves "
                "with two option axes at this --products", code="generator_config"
            )
        self.two_axis = two_axis = set(pick_many(master, eligible, two_axis_count))
        del eligible
        kept = [i for i in range(total) if i not in two_axis]
        persona = pick_many(master, kept, persona_count)
        del kept
        order = list(range(total))
        master.shuffle(order)
        self.position_of = position_of = array("q", bytes(8 * total))
        for position, slot in enumerate(order):
            position_of[slot] = position
        del order
        self.asins = array("q", master.sample(range(10**11, 10**12), total))
        self.persona_positions = sorted(position_of[i] for i in persona)

    def _draft_products(
        self, store: DraftStore[tuple[ProductDraft, Requirements, str]]
    ) -> tuple[dict[str, list[Brand]], dict[int, list[int]], array[int]]:
        """Make every product leaf by leaf into ``store`` (each leaf its own random stream), then add the confusers.

        Returns the brands per domain, the archive positions per leaf index and the leaf index per position."""
        seed, vocab, leaves, sizes = self.seed, self.vocab, self.leaves, self.sizes
        total = len(self.position_of)
        brands = {
            domain: make_brands(vocab, domain, BRANDS_PER_DOMAIN, random.Random(f"{seed}:brands:{domain}"))
            for domain in vocab.domains
        }
        by_leaf: dict[int, list[int]] = {}
        leaf_of = array("i", bytes(4 * total))
        slot_index = 0
        for li, leaf in enumerate(leaves):
            rng = random.Random(f"{seed}:leaf:{leaf.name}")
            pool = brands[leaf.domain]
            shops = pick_many(rng, pool, rng.randint(12, min(24, len(pool))))
            weights = [1.0 / (rank + 1) ** 0.8 for rank in range(len(shops))]
            near: tuple[list[str], tuple[str, ...]] | None = None
            for _ in range(sizes[li]):
                position = self.position_of[slot_index]
                brand = rng.choices(shops, weights)[0]
                draft = price_amounts(make_product(  # an amount axis is priced by its amount
                    leaf, str(self.asins[position]), brand, slot_index in self.two_axis, vocab, rng, near
                ), f"{seed}:amounts")
                req = choose_requirements(draft, vocab, rng)
                near = (draft.record["attribute"], req.attributes)
                store.put(position, (draft, req, full_instruction(draft, req, vocab, rng)))
                by_leaf.setdefault(li, []).append(position)
                leaf_of[position] = li
                slot_index += 1
        self.confusers = add_confusers(
            leaves, by_leaf, store, vocab, random.Random(f"{seed}:confusers"), set(self.persona_positions)
        )
        return brands, by_leaf, leaf_of

    def __iter__(self) -> Iterator[tuple[dict[str, Any], TaskAudit]]:
        seed, config, vocab = self.seed, self.config, self.vocab
        total = len(self.position_of)
        store: DraftStore[tuple[ProductDraft, Requirements, str]] = (
            MemoryStore(total) if self.in_memory else SpillStore(total, vocab, self.spill_dir)
        )
        try:
            brands, by_leaf, leaf_of = self._draft_products(store)

            prng = random.Random(f"{seed}:personas")
            owners: list[int] = []
            for user_index, size in enumerate(user_group_sizes(config, prng)):
                owners.extend([user_index] * size)
            prng.shuffle(owners)
            noise_brands = [b.name for domain in vocab.domains for b in brands[domain][:6]]
            user_ids = [str(n) for n in prng.sample(range(10**7, 10**8), max(1, len(set(owners))))]
            owner_of = dict(zip(self.persona_positions, owners, strict=True))
            held_out = self._held_out_owners(owners, user_ids)
            levels = _budget_levels(owner_of, store)
            remaining = Counter(owners)
            del owners
            users: dict[int, User] = {}
            all_nouns = [leaf.noun for leaf in vocab.leaves]
            taken_simple: set[str] = set()
            taken_full: set[str] = set()
            for position in range(total):
                draft, req, text = store.get(position)
                owner = owner_of.get(position)
                task: PersonaTask | None = None
                user_id: str | None = None
                task_held = False
                if owner is not None:
                    if owner not in users:
                        users[owner] = make_user(f"U{user_ids[owner]}", vocab, noise_brands, prng, levels.pop(owner))
                        users[owner].held_out = owner in held_out
                        self.user_task_counts[users[owner].user_id] = 0
                    user = users[owner]
                    user_id = user.user_id
                    task_held = user.held_out
                    text = _unique_full(draft, req, text, taken_full, vocab, prng)
                    same_leaf = by_leaf[leaf_of[position]]
                    neighbours = pick_many(prng, same_leaf, min(6, len(same_leaf)))
                    siblings = [store.get(p)[0] for p in neighbours if p != position]
                    unrelated = [n for n in pick_many(prng, all_nouns, 3) if n != draft.leaf.noun]
                    task = persona_task(draft, req, user, siblings, unrelated, taken_simple, normalize_text, vocab, prng)
                    remaining[owner] -= 1
                    if not remaining[owner]:
                        self.user_task_counts[user.user_id] = user.task_count
                        del users[owner], remaining[owner]
                yield _finish(position, draft, req, text, task, user_id, task_held)
        finally:
            store.close()

    def _held_out_owners(self, owners: list[int], user_ids: list[str]) -> set[int]:
        """The users (indices) whose tasks prepare's default persona split will put into val or test.

        A prepared task id is the product's archive position (every product carries one instruction with
        attributes; cleaning drops two-axis products but not their ids); a generated user's tasks share nothing
        else, so its split group is the user (``phrasing.predicted_held_out_users``, checked against prepare by
        a test).
        """
        task_ids = list(self.persona_positions)
        names = [f"U{user_ids[owner]}" for owner in owners]
        held = predicted_held_out_users(task_ids, [normalize_text(name) for name in names])
        return {owner for owner, name in zip(owners, names, strict=True) if normalize_text(name) in held}


def _budget_levels(owner_of: dict[int, int], store: DraftStore[tuple[ProductDraft, Requirements, str]]) -> dict[int, list[float]]:
    """Each user's budget levels, one per task: the stated ceiling, or the leaf's middle price without one
    (平均客单价 and 消费等级 follow them, ``users.spend_level``)."""
    levels: dict[int, list[float]] = {}
    for position, owner in owner_of.items():
        draft, req, _ = store.get(position)
        low, high = draft.leaf.price_range
        levels.setdefault(owner, []).append(req.budget.ceiling or math.sqrt(low * high))
    return levels


def _finish(
    position: int, draft: ProductDraft, req: Requirements, text: str, task: PersonaTask | None, user_id: str | None,
    held_out: bool = False,
) -> tuple[dict[str, Any], TaskAudit]:
    """The archive record of one product (a copy: the stored draft stays as it was made) and its audit."""
    record = dict(draft.record)
    if task is not None:
        record["user_persona"] = task.persona
    record["instructions"] = [
        {
            "instruction": text,
            "instruction_simple": task.simple if task else None,
            "attributes": list(req.attributes),
            "instruction_options": [value for _, value in req.options],
            "price_upper": None,
            "instruction_index": 0,
        }
    ]
    audit = TaskAudit(
        position=position,
        asin=record["asin"],
        leaf=draft.leaf.name,
        persona=task is not None,
        two_axis=draft.two_axis,
        budget_kind=req.budget.kind,
        budget_phrase=req.budget.phrase,
        ceiling=req.budget.ceiling,
        gold_price=draft.gold_price,
        dearer_price=draft.dearer_price,
        gold_options=dict(draft.gold),
        user_id=user_id,
        omitted=tuple(value for _, value in task.omitted) if task else (),
        problems=tuple(task.problems) if task else (),
        held_out=held_out,
        forms=tuple(task.phrasing.used) if task and task.phrasing else (),
    )
    return record, audit


def build_catalog(seed: int = DEFAULT_SEED, config: GeneratorConfig | None = None) -> GeneratedCatalog:
    """Generate the whole catalog in memory with its private task audits (tests, statistics, small sizes)."""
    stream = CatalogStream(seed, config, in_memory=True)
    records: list[dict[str, Any]] = []
    audits: list[TaskAudit] = []
    for record, audit in stream:
        records.append(record)
        audits.append(audit)
    return GeneratedCatalog(
        records, audits, stream.leaves, stream.leaf_sizes, stream.user_task_counts, stream.confusers
    )


def generate_catalog(seed: int = DEFAULT_SEED, config: GeneratorConfig | None = None) -> list[dict[str, Any]]:
    """The raw source archive records (docs/contract.md#catalog-archive) of the default catalog for ``seed``."""
    return build_catalog(seed, config).records
