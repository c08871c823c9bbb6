"""Orchestration: the deterministic default catalog, as a raw source archive (docs/contract.md#catalog-archive) and its manifest.

All randomness comes from ``random.Random`` instances seeded with strings derived from the seed (a master
stream for the global layout, one stream per leaf, one for personas); the global RNG is never touched and
no set of strings is iterated, so the same seed and generator version give byte-identical output in any
process. Counts are exact: ``products`` raw products with one instruction each, ``two_axis_products`` of
them with two price-affecting axes (cleaning excludes them), and ``persona_tasks`` persona tasks, all on
kept products; every other kept product carries a standard task.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import math
import os
import random
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..catalog.archive import atomic_write_bytes, dump_json_file_bytes
from ..catalog.splits import normalize_text
from ..errors import DataError
from .amounts import price_amounts
from .confusers import Confuser, add_confusers
from .instructions import Requirements, choose_requirements, full_instruction
from .personas import PersonaTask, persona_task
from .phrasing import predicted_held_out_users
from .products import ProductDraft, make_brands, make_product
from .rng import pick_many
from .spill import DraftStore, MemoryStore, SpillStore
from .users import User, make_user
from .vocabulary import Leaf, Vocabulary, load_vocabulary

GENERATOR_VERSION = "shopsimrl-catalog-generator-v8.1"
DEFAULT_SEED = 20240521
LEAF_MIN_ITEMS = 60
LEAF_MAX_ITEMS = 200
LEAF_TYPICAL_ITEMS = 140
"""The default catalog's mean leaf size (23,421 / 170); larger catalogs scale their leaf bounds by it."""
BRANDS_PER_DOMAIN = 40
MANIFEST_SUFFIX = ".manifest.json"
REAL_PRODUCTS, REAL_TWO_AXIS, REAL_PERSONA = 23421, 695, 4526


@dataclass(frozen=True)
class GeneratorConfig:
    """Scale knobs. The defaults reproduce the shape of the real archive (23,421 / 695 / 4,526)."""

    products: int = 23421
    two_axis_products: int | None = None
    """None: the real archive's share, ``round(products * 695 / 23421)``."""
    persona_tasks: int | None = None
    """None: the real archive's share, ``round(products * 4526 / 23421)``."""
    leaf_count: int | None = None
    """How many leaves to use; None: all leaves when they can hold 60–200 items each, else ``products // 80``."""
    large_group_share: float = 0.067
    """Share of the persona tasks owned by one very active user (a linked group that stays in train)."""
    mid_groups: int = 3
    """Users with 25–45 tasks each (also too large for a held-out split)."""
    small_multi_groups: int = 68
    """Users with 2–9 tasks each, at the default persona count (scaled with ``persona_tasks``)."""

    def __post_init__(self) -> None:
        # Errors name the CLI flags (``data generate``), which is where these values come from.
        if self.products < 1:
            raise DataError(f"--products must be positive (got {self.products})", code="generator_config")
        two_axis = self.two_axis_products
        if two_axis is None:
            two_axis = round(self.products * REAL_TWO_AXIS / REAL_PRODUCTS)
            object.__setattr__(self, "two_axis_products", two_axis)
        persona = self.persona_tasks
        if persona is None:
            persona = round(self.products * REAL_PERSONA / REAL_PRODUCTS)
            object.__setattr__(self, "persona_tasks", persona)
        if not 0 <= two_axis <= self.products:
            raise DataError(
                f"--two-axis-products must be between 0 and --products ({self.products}); got {two_axis}", code="generator_config"
            )
        kept = self.products - two_axis
        if not 0 <= persona <= kept:
            raise DataError(
                f"--persona-tasks must be between 0 and --products minus --two-axis-products ({kept}); "
                f"got {persona}", code="generator_config"
            )

    @property
    def two_axis_count(self) -> int:
        """``two_axis_products`` as resolved by ``__post_init__`` (never None after construction)."""
        return self.two_axis_products if self.two_axis_products is not None else 0

    @property
    def persona_count(self) -> int:
        """``persona_tasks`` as resolved by ``__post_init__`` (never None after construction)."""
        return self.persona_tasks if self.persona_tasks is not None else 0

    @property
    def standard_tasks(self) -> int:
        return self.products - self.two_axis_count - self.persona_count


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
    """v7: what the decidability check found for a persona task (empty: decidable from public information)."""
    held_out: bool = False
    """v7: the task's user is predicted to fall into the val/test persona split."""
    forms: tuple[str, ...] = ()
    """v7: the table forms (cues, paraphrases, templates) the persona task was written with."""


@dataclass
class GeneratedCatalog:
    records: list[dict[str, Any]]
    audits: list[TaskAudit]
    leaves: list[Leaf]
    leaf_sizes: dict[str, int]
    user_task_counts: dict[str, int] = field(default_factory=dict)
    confusers: list[Confuser] = field(default_factory=list)
    """v6 cross-leaf confusers (archive positions of the confuser and of the task it confuses)."""


def _choose_leaves(vocab: Vocabulary, config: GeneratorConfig, rng: random.Random) -> list[Leaf]:
    leaves = list(vocab.leaves)
    count = config.leaf_count
    if count is None:
        count = len(leaves) if config.products >= LEAF_MIN_ITEMS * len(leaves) else config.products // 80
    count = max(1, min(len(leaves), count))
    if count == len(leaves):
        return leaves
    by_domain: dict[str, list[Leaf]] = {}
    for leaf in leaves:
        by_domain.setdefault(leaf.domain, []).append(leaf)
    for items in by_domain.values():
        rng.shuffle(items)
    chosen: list[Leaf] = []
    while len(chosen) < count:
        for domain in vocab.domains:
            if by_domain[domain] and len(chosen) < count:
                chosen.append(by_domain[domain].pop())
    return sorted(chosen, key=leaves.index)


def _leaf_sizes(total: int, count: int, rng: random.Random) -> list[int]:
    """Split ``total`` over ``count`` leaves with the default catalog's spread (at any size).

    Up to 200 items a leaf: each leaf gets 60–200 (weights 0.45–1.55 around the mean), evenly when even 60
    each is too many. Beyond that the same weights and bounds are scaled by ``mean / LEAF_TYPICAL_ITEMS``, so
    a 50× catalog has leaves of ~3,000–10,000 products in the same proportions instead of equal leaves.
    """
    low, high = LEAF_MIN_ITEMS, LEAF_MAX_ITEMS
    if total > high * count:
        factor = total / count / LEAF_TYPICAL_ITEMS
        low, high = math.floor(LEAF_MIN_ITEMS * factor), math.ceil(LEAF_MAX_ITEMS * factor)
    if not low * count <= total <= high * count:
        base, extra = divmod(total, count)
        return [base + (1 if i < extra else 0) for i in range(count)]
    weights = [rng.uniform(0.45, 1.55) for _ in range(count)]
    scale = total / sum(weights)
    sizes = [min(high, max(low, int(w * scale))) for w in weights]
    order = list(range(count))
    rng.shuffle(order)
    while (gap := total - sum(sizes)) != 0:
        step = 1 if gap > 0 else -1
        for i in order:
            if sizes[i] + step < low or sizes[i] + step > high:
                continue
            sizes[i] += step
            gap -= step
            if gap == 0:
                break
    return sizes


def _group_sizes(config: GeneratorConfig, rng: random.Random) -> list[int]:
    """Tasks per user: one large user, a few mid-size ones, some small multi-task ones, the rest singletons."""
    total = config.persona_count
    scale = total / 4526
    sizes: list[int] = []
    large = round(total * config.large_group_share)
    if large >= 2:
        sizes.append(large)
    if total >= 1000:
        sizes.extend(rng.randint(25, 45) for _ in range(config.mid_groups))
    for _ in range(round(config.small_multi_groups * scale)):
        sizes.append(rng.randint(2, 9))
    while sum(sizes) > total:
        sizes.pop()
    sizes.extend([1] * (total - sum(sizes)))
    return sizes


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
        self.leaves = leaves = _choose_leaves(vocab, config, master)
        self.sizes = sizes = _leaf_sizes(config.products, len(leaves), master)
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

    def __iter__(self) -> Iterator[tuple[dict[str, Any], TaskAudit]]:
        seed, config, vocab, leaves, sizes = self.seed, self.config, self.vocab, self.leaves, self.sizes
        total = len(self.position_of)
        store: DraftStore[tuple[ProductDraft, Requirements, str]] = (
            MemoryStore(total) if self.in_memory else SpillStore(total, vocab, self.spill_dir)
        )
        try:
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
                    draft = price_amounts(make_product(  # v8.1: amount axes priced by their amount
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

            prng = random.Random(f"{seed}:personas")
            owners: list[int] = []
            for user_index, size in enumerate(_group_sizes(config, prng)):
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
    """v8: each user's budget levels, one per task: the stated ceiling, or the leaf's middle price without one
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


def _gzip(data: bytes) -> bytes:
    """Gzip with mtime 0 and no file name, so equal data gives equal bytes (level 6: fast enough for 60 s)."""
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0, compresslevel=6) as handle:
        handle.write(data)
    return buffer.getvalue()


def manifest_path_for(path: str | os.PathLike[str]) -> Path:
    """The manifest sits next to the archive: ``<archive path>.manifest.json``."""
    target = Path(path)
    return target.with_name(target.name + MANIFEST_SUFFIX)


def vocabulary_sha256() -> str:
    """SHA-256 over the vocabulary data files (a changed vocabulary means a different catalog)."""
    from importlib import resources

    digest = hashlib.sha256()
    folder = resources.files(__package__).joinpath("vocab")
    for name in sorted(entry.name for entry in folder.iterdir() if entry.name.endswith(".json")):
        digest.update(name.encode())
        digest.update(folder.joinpath(name).read_bytes())
    return digest.hexdigest()


class _Counts:
    """The manifest's counts, accumulated one audit at a time (so a streamed catalog need not be held)."""

    def __init__(self) -> None:
        self.raw = self.two_axis = self.persona = self.standard = 0
        self.budget_kinds: Counter[str] = Counter()
        self.persona_budget_kinds: Counter[str] = Counter()
        self.undecidable = 0

    def add(self, audit: TaskAudit) -> None:
        self.raw += 1
        self.two_axis += audit.two_axis
        self.persona += audit.persona
        self.standard += not audit.persona and not audit.two_axis
        if not audit.two_axis:
            self.budget_kinds[audit.budget_kind] += 1
        if audit.persona:
            self.persona_budget_kinds[audit.budget_kind] += 1
            self.undecidable += bool(audit.problems)

    def statistics(self, leaves: list[Leaf], leaf_sizes: dict[str, int], user_task_counts: dict[str, int]) -> dict[str, Any]:
        sizes = list(leaf_sizes.values())
        group_sizes = sorted(user_task_counts.values(), reverse=True)
        return {
            "raw_products": self.raw,
            "two_axis_products": self.two_axis,
            "kept_products": self.raw - self.two_axis,
            "persona_tasks": self.persona,
            "standard_tasks": self.standard,
            "domains": len({leaf.domain: None for leaf in leaves}),
            "leaf_categories": len(leaves),
            "leaf_size_min": min(sizes),
            "leaf_size_max": max(sizes),
            "budget_kinds": dict(sorted(self.budget_kinds.items())),
            "persona_budget_kinds": dict(sorted(self.persona_budget_kinds.items())),
            "persona_users": len(group_sizes),
            "multi_task_users": sum(1 for size in group_sizes if size > 1),
            "largest_user_tasks": group_sizes[0] if group_sizes else 0,
            "undecidable_persona_tasks": self.undecidable,
        }


def catalog_statistics(catalog: GeneratedCatalog) -> dict[str, Any]:
    """Counts and shape figures of a generated catalog (what the manifest reports)."""
    counts = _Counts()
    for audit in catalog.audits:
        counts.add(audit)
    return counts.statistics(catalog.leaves, catalog.leaf_sizes, catalog.user_task_counts)


class _HashingWriter(io.RawIOBase):
    """A binary sink that hashes what passes through it into the file under it."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle
        self.digest = hashlib.sha256()

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        self.digest.update(data)
        self.handle.write(data)
        return len(data)


def _stream_archive(target: Path, records: Iterable[dict[str, Any]]) -> tuple[str, str]:
    """Write the canonical archive record by record (no whole-archive byte string in memory).

    The bytes equal ``dump_archive_json`` (compact list, sorted keys) and, for ``.gz``, the deterministic gzip
    of ``_gzip`` (zlib's output does not depend on how the input is chunked). Temp file + rename, as before.
    Returns (archive SHA-256, decompressed data SHA-256).
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(target.name + ".building")
    data_digest = hashlib.sha256()
    with open(temporary, "wb") as handle:
        sink = _HashingWriter(handle)
        stream: Any = (
            gzip.GzipFile(filename="", mode="wb", fileobj=sink, mtime=0, compresslevel=6)
            if str(target).endswith(".gz")
            else sink
        )
        index = -1
        for index, record in enumerate(records):
            chunk = ("[" if index == 0 else ",") + json.dumps(
                record, sort_keys=True, ensure_ascii=False, separators=(",", ":")
            )
            data = chunk.encode("utf-8")
            data_digest.update(data)
            stream.write(data)
        tail = ("]" if index >= 0 else "[]").encode("utf-8") + b"\n"
        data_digest.update(tail)
        stream.write(tail)
        if stream is not sink:
            stream.close()
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, target)
    return sink.digest.hexdigest(), data_digest.hexdigest()


def write_catalog(
    path: str | os.PathLike[str],
    seed: int = DEFAULT_SEED,
    config: GeneratorConfig | None = None,
    *,
    in_memory: bool = False,
    progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Write the archive and ``<path>.manifest.json`` atomically (temp file + rename); returns the manifest.

    A path ending in ``.gz`` gets a deterministic gzip (mtime 0, no file name), any other path plain JSON.
    The manifest holds the generator version, seed, config, counts and the SHA-256 of the archive file and
    of its decompressed data; it has no timestamps, so it is byte-identical for the same seed too.
    Products are streamed (``CatalogStream``): drafts wait in an unlinked spill file next to the archive
    unless ``in_memory`` (the reference the byte-identity test compares with). ``progress(n)``: ``n`` more
    records were written (every 500, and the rest at the end).
    """
    config = config or GeneratorConfig()
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    stream = CatalogStream(seed, config, in_memory=in_memory, spill_dir=target.parent)
    counts = _Counts()

    def records() -> Iterator[dict[str, Any]]:
        written = 0
        for record, audit in stream:
            counts.add(audit)
            yield record
            written += 1
            if progress is not None and written % 500 == 0:
                progress(500)
        if progress is not None and written % 500:
            progress(written % 500)

    archive_sha, data_sha = _stream_archive(target, records())
    manifest = {
        "generator_version": GENERATOR_VERSION,
        "seed": seed,
        "config": asdict(config),
        "archive": target.name,
        "archive_sha256": archive_sha,
        "data_sha256": data_sha,
        "vocabulary_sha256": vocabulary_sha256(),
        "counts": counts.statistics(stream.leaves, stream.leaf_sizes, stream.user_task_counts),
    }
    atomic_write_bytes(manifest_path_for(target), dump_json_file_bytes(manifest))
    return manifest
