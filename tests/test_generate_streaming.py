"""Streamed generation (issue 14 item 4): the spilled stream writes exactly what holding everything would,
and per-leaf sizes and the persona-task share keep their shape at another scale.

These compare two ways of producing the same catalog, not hard-coded bytes, so they keep holding when the
generator's content changes (a new generator version).
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from statistics import mean

from shopsimrl.generate import DEFAULT_SEED, GeneratorConfig, write_catalog
from shopsimrl.generate.generator import CatalogStream
from shopsimrl.generate.layout import (
    LEAF_MAX_ITEMS,
    LEAF_MIN_ITEMS,
    REAL_PERSONA,
    REAL_PRODUCTS,
    REAL_TWO_AXIS,
    split_leaf_sizes,
)
from shopsimrl.generate.spill import SpillStore

# More persona tasks than the real share, so that users own several tasks and siblings are read often.
CONFIG = GeneratorConfig(products=1500, two_axis_products=40, persona_tasks=500)


def _canonical(record: dict) -> str:
    return json.dumps(record, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def test_spilled_stream_writes_the_same_bytes_as_the_in_memory_reference(tmp_path: Path) -> None:
    (tmp_path / "spilled").mkdir()
    (tmp_path / "memory").mkdir()
    for name in ("catalog.json.gz", "catalog.json"):
        spilled = write_catalog(tmp_path / "spilled" / name, 11, CONFIG)
        memory = write_catalog(tmp_path / "memory" / name, 11, CONFIG, in_memory=True)
        assert (tmp_path / "spilled" / name).read_bytes() == (tmp_path / "memory" / name).read_bytes()
        assert spilled == memory
        assert spilled["counts"]["multi_task_users"] > 0  # the case where a user is kept across tasks
    assert not list((tmp_path / "spilled").glob("*.spill")), "the spill file must not outlive the run"


def test_records_do_not_change_after_they_are_emitted() -> None:
    """The old generator wrote after everything was made; the stream writes each record as it comes, so a
    record must be final when it is emitted (nothing made later may reach into it)."""
    stream = CatalogStream(DEFAULT_SEED, CONFIG, in_memory=True)
    emitted: list[tuple[dict, str]] = [(record, _canonical(record)) for record, _ in stream]
    assert len(emitted) == CONFIG.products
    assert all(_canonical(record) == text for record, text in emitted)
    assert sum(1 for record, _ in emitted if record.get("user_persona")) == CONFIG.persona_tasks
    assert sum(stream.user_task_counts.values()) == CONFIG.persona_tasks


def test_spill_store_round_trips_drafts_and_keeps_vocabulary_objects_shared() -> None:
    stream = CatalogStream(DEFAULT_SEED, GeneratorConfig(products=200), in_memory=True)
    leaf = stream.leaves[0]
    store: SpillStore[tuple[str, object, dict]] = SpillStore(3, stream.vocab)
    try:
        payload = {"axes": list(leaf.axes), "text": "颜色分类", "n": [1, 2.5, None]}
        store.put(2, ("a", leaf, payload))
        store.put(0, ("b", stream.vocab, {}))
        text, got_leaf, got_payload = store.get(2)
        assert (text, got_payload) == ("a", payload)
        assert got_leaf is leaf and all(a is b for a, b in zip(got_payload["axes"], leaf.axes, strict=True))
        assert store.get(0)[1] is stream.vocab
        assert store.get(2)[2] is not got_payload  # every read is a fresh copy
    finally:
        store.close()


def _spread(sizes: list[int]) -> tuple[float, float, float]:
    average = mean(sizes)
    ordered = sorted(sizes)
    return ordered[0] / average, ordered[len(ordered) // 2] / average, ordered[-1] / average


def test_leaf_sizes_keep_the_default_spread_at_50x() -> None:
    leaves = 170
    default = split_leaf_sizes(REAL_PRODUCTS, leaves, random.Random(3))
    assert sum(default) == REAL_PRODUCTS and min(default) >= LEAF_MIN_ITEMS and max(default) <= LEAF_MAX_ITEMS
    for scale in (2, 10, 50):
        sizes = split_leaf_sizes(REAL_PRODUCTS * scale, leaves, random.Random(3))
        assert sum(sizes) == REAL_PRODUCTS * scale
        for got, want in zip(_spread(sizes), _spread(default), strict=True):
            assert abs(got - want) < 0.1, (scale, _spread(sizes), _spread(default))


def _shape(products: int, leaf_count: int) -> tuple[dict, CatalogStream]:
    config = GeneratorConfig(products=products, leaf_count=leaf_count)
    stream = CatalogStream(DEFAULT_SEED, config, in_memory=True)
    audits = [audit for _, audit in stream]
    persona = sum(audit.persona for audit in audits)
    per_leaf = {leaf.name: 0 for leaf in stream.leaves}
    for audit in audits:
        per_leaf[audit.leaf] += 1
    assert per_leaf == stream.leaf_sizes
    return {
        "persona_share": persona / products,
        "two_axis_share": sum(audit.two_axis for audit in audits) / products,
        "largest_user_share": max(stream.user_task_counts.values()) / persona,
        "spread": _spread(list(per_leaf.values())),
    }, stream


def test_per_leaf_sizes_and_persona_share_keep_their_shape_at_another_scale() -> None:
    """Eight leaves at ~140 products each (the default's density) and at ~4× that (beyond 200 a leaf)."""
    small, _ = _shape(8 * 140, 8)
    large, stream = _shape(8 * 560, 8)
    assert max(stream.leaf_sizes.values()) > LEAF_MAX_ITEMS
    assert len(set(stream.leaf_sizes.values())) > 4, "leaves must not all be the same size"
    for shape in (small, large):
        assert abs(shape["persona_share"] - REAL_PERSONA / REAL_PRODUCTS) < 0.002
        assert abs(shape["two_axis_share"] - REAL_TWO_AXIS / REAL_PRODUCTS) < 0.002
    assert abs(large["largest_user_share"] - small["largest_user_share"]) < 0.02
    for got, want in zip(large["spread"], small["spread"], strict=True):
        assert abs(got - want) < 0.05, (large["spread"], small["spread"])
