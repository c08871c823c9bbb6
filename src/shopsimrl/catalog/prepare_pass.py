"""``prepare``'s one pass over the source archive, a chunk of records at a time: validate, clean, write the cleaned
archive and the records and goals that opening reads, and keep only the totals the later steps need (budget audit
rows, persona tasks reduced to their linking values) — memory holds one chunk, never the archive."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..budget.annotations import task_identities
from ..errors import DataError
from ._lazy import RecordsWriter
from .archive_stream import ArchiveWriter, iter_archive_records
from .cleaning import Cleaner
from .goals import build_goals
from .record_checks import validate_records
from .splits import PersonaTask

_END = object()


@dataclass(frozen=True, slots=True)
class _LinkedTask(PersonaTask):
    """A persona task reduced to what the split policy reads (its id and linking values), not its persona."""

    values: tuple[tuple[str, str], ...] = ()

    def group_values(self) -> tuple[tuple[str, str], ...]:
        return self.values


@dataclass
class Totals:
    """What the streamed pass keeps: ids, small audit rows and the persona tasks (never the records)."""

    cleaned_products: int = 0
    inactive_instructions: int = 0
    budget_rows: list[tuple[int, str, float | None, str]] = field(default_factory=list)
    persona_tasks: list[PersonaTask] = field(default_factory=list)
    #: Set once the budget rows are written (``prepare``): how many there were, and their sources' counts.
    active_tasks: int = 0
    budget_sources: dict[str, int] = field(default_factory=dict)


def stream_archive(
    archive_path: Path, cleaned_archive: Path, records_dir: Path, cleaner: Cleaner, say: Callable[[str], None],
    identities: dict[int, tuple[str, str]] | None = None, *, chunk_size: int,
) -> tuple[Totals, tuple[str, str], list[str]]:
    """One pass over the source archive, ``chunk_size`` records at a time: validate, clean, write the cleaned
    archive and the records and goals opening reads. Returns the totals, (data SHA-256, archive SHA-256) and the
    record files."""
    totals = Totals()
    writer = ArchiveWriter(cleaned_archive)
    records = RecordsWriter(records_dir)
    seen_asins: dict[str, int] = {}
    source = str(archive_path)
    try:
        chunk: list[Any] = []
        start = 0
        for record in itertools.chain(iter_archive_records(archive_path), [_END]):
            if record is not _END:
                chunk.append(record)
                if len(chunk) < chunk_size:
                    continue
            if not chunk:
                break
            products = validate_records(chunk, source=source, start=start)
            for product in products:
                first = seen_asins.setdefault(product.asin, product.index)
                if first != product.index:
                    raise DataError(
                        f"{source}: validation problem: record {product.index} (asin {product.asin!r}) field 'asin': "
                        f"duplicate ASIN (first seen at record {first})", code="archive"
                    )
            kept = [record for product in products if (record := cleaner.add(product)) is not None]
            if identities is not None:  # only the annotated ids: the check needs no more
                identities.update((task_id, identity) for task_id, identity in task_identities(kept).items()
                                  if task_id in cleaner.annotations)
            texts = [writer.add(record) for record in kept]
            _add_cleaned(texts, totals, records)
            start += len(chunk)
            if start % (chunk_size * 50) == 0:
                say(f"  {start} products read")
            chunk = []
        hashes = writer.finish()
        return totals, hashes, records.finish()
    except BaseException:
        writer.abort()
        records.abort()
        raise


def _add_cleaned(texts: list[str], totals: Totals, records: RecordsWriter) -> None:
    """Goals, budget audit rows and persona tasks of a chunk of cleaned records (their archive JSON texts)."""
    cleaned = validate_records([json.loads(text) for text in texts], source="cleaned archive",
                               start=totals.cleaned_products)
    totals.cleaned_products += len(cleaned)
    goals, skips = build_goals(cleaned)
    totals.inactive_instructions += skips.instructions_without_attributes
    precomputed = {
        instruction.task_id: instruction.price_upper for product in cleaned for instruction in product.instructions
    }
    for product, text in zip(cleaned, texts, strict=True):
        records.add_product(product.asin, text.encode("utf-8"))
    for task_id, goal in goals.items():
        records.add_goal(task_id, goal)
        source = "precomputed" if precomputed.get(task_id) is not None else "instruction_parser"
        if goal["price_upper"] is None:
            source = "none"
        totals.budget_rows.append((task_id, goal["asin"], goal["price_upper"], source))
        if goal["user_persona"]:
            task = PersonaTask(
                task_id, goal["asin"], goal["instruction_simple"], goal["instruction_text"], goal["user_persona"]
            )
            totals.persona_tasks.append(_LinkedTask(task_id, task.asin, "", "", {}, task.group_values()))
