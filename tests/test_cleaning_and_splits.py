"""Cleaning (docs/contract.md#price-axes, #task-ids), persona splits (docs/contract.md#splits) and explicit task splits (acceptance cases test_data_cleaning,
test_project_splits, test_task_splits)."""

from __future__ import annotations

import json

from error_kinds import raises_kind
from shopsimrl.catalog.archive import validate_records
from shopsimrl.catalog.cleaning import clean_products, task_uid_for
from shopsimrl.catalog.options import price_affecting_axes
from shopsimrl.catalog.splits import PersonaTask, build_persona_splits, link_groups
from shopsimrl.errors import DataError


def _product(asin, *, simple=None, options=None, persona=None, instruction=None):
    record = {
        "asin": asin, "title": f"product {asin}", "shop_name": "shop", "category": "test", "pricing": [10.0],
        "customization_options": options or {}, "attribute": ["test"], "images": ["https://img/x.jpg"],
        "instructions": [{
            "instruction": instruction or f"完整指令 {asin}", "instruction_simple": simple,
            "attributes": ["test"], "instruction_options": [], "price_constraint": {"status": "valid"},
        }],
    }
    if simple:
        record["user_persona"] = persona or {"preference": "test"}
    return record


def test_filter_precedes_annotation_and_ids_keep_gaps():
    two_axes = {
        "color": [{"value": "red", "price": 10}, {"value": "blue", "price": 20}],
        "size": [{"value": "s", "price": 10}, {"value": "m", "price": 30}],
    }
    products = validate_records([
        _product("a"),
        _product("b", simple="b简", options=two_axes),
        _product("c", simple="c简"),
    ])
    result = clean_products(products, annotations={2: 110.0})
    assert [r["asin"] for r in result.records] == ["a", "c"]
    assert [i["task_id"] for r in result.records for i in r["instructions"]] == [0, 2]
    assert result.persona_task_ids == [2] and result.standard_task_ids == [0]
    assert [e.to_json() for e in result.exclusions] == [{
        "asin": "b", "price_affecting_axes": ["color", "size"], "reason": "multiple_price_affecting_axes",
        "source_product_index": 1, "task_ids": [1],
    }]
    a, c = result.records
    assert a["instructions"][0]["price_upper"] is None
    assert c["instructions"][0]["price_upper"] == 110.0
    assert c["source_product_index"] == 2
    assert "price_constraint" not in c["instructions"][0]
    assert result.source_task_count == 3


def test_cleaning_never_mutates_input_and_keeps_given_ids():
    raw = [_product("a"), _product("b")]
    raw[1]["instructions"][0]["task_id"] = 7
    raw[1]["instructions"][0]["task_uid"] = "shopsim-given"
    before = json.dumps(raw, sort_keys=True)
    result = clean_products(validate_records(raw))
    assert json.dumps(raw, sort_keys=True) == before
    assert result.records[1]["instructions"][0]["task_id"] == 7
    assert result.records[1]["instructions"][0]["task_uid"] == "shopsim-given"
    assert result.records[0]["instructions"][0]["task_uid"] == task_uid_for("a", 0, "完整指令 a")


def test_task_uid_matches_reference_shape():
    uid = task_uid_for("747848614498", 0, "我想买")
    assert uid.startswith("shopsim-") and len(uid) == len("shopsim-") + 24


def test_price_axis_normalisation_merges_equivalent_values():
    options = {
        "颜色分类": [{"value": "黑色/白色", "price": 10}, {"value": "黑色 | 白色", "price": 20}],
        "尺码": [{"value": "M", "price": 5}, {"value": "m", "price": 5}, {"value": "L", "price": -1}],
    }
    # the two colour spellings share a key (the later one wins), so that axis has one price
    assert price_affecting_axes(options) == []
    options["尺码"].append({"value": "XL", "price": 9})
    assert price_affecting_axes(options) == ["尺码"]


def _split_tasks(n, link=None):
    tasks = []
    for i in range(n):
        persona = {"用户ID": f"user-{i}", "preference": f"preference-{i}"}
        full, simple = f"完整需求 {i}", f"简化需求 {i}"
        if link and i in link:
            persona = link[i]
        tasks.append(PersonaTask(i, f"asin-{i}", simple, full, persona))
    return tasks


def test_split_is_exact_deterministic_and_group_disjoint():
    tasks = _split_tasks(14)
    tasks[1] = PersonaTask(1, "asin-1", "另一个简化需求", "另一个完整需求", tasks[0].persona)
    first = build_persona_splits(tasks, seed=42, val_size=3, test_size=3, held_out_max_group_size=2)
    second = build_persona_splits(list(reversed(tasks)), seed=42, val_size=3, test_size=3, held_out_max_group_size=2)
    assert first == second
    sizes = {name: entry["task_count"] for name, entry in first["splits"].items()}
    assert sizes == {"train": 8, "val": 3, "test": 3}
    covered = sorted(t for entry in first["splits"].values() for t in entry["task_ids"])
    assert covered == list(range(14))
    where = {t: name for name, entry in first["splits"].items() for t in entry["task_ids"]}
    assert where[0] == where[1]
    assert all(first["checks"].values())


def test_large_linked_group_stays_out_of_held_out_splits():
    shared = {"用户ID": "shared-user"}
    tasks = _split_tasks(12)
    for i in (0, 1, 2):
        tasks[i] = PersonaTask(i, f"asin-{i}", f"简化需求 {i}", f"完整需求 {i}", {**shared, "x": i})
    manifest = build_persona_splits(tasks, seed=7, val_size=2, test_size=2, held_out_max_group_size=2)
    assert {0, 1, 2} <= set(manifest["splits"]["train"]["task_ids"])
    assert manifest["splits"]["test"]["max_group_size"] <= 2
    assert manifest["splits"]["val"]["max_group_size"] <= 2


def test_links_use_normalised_text_and_user_id():
    tasks = [
        PersonaTask(0, "a0", "想买 台灯", "full 0", {"用户ID": "U1"}),
        PersonaTask(1, "a1", "想买　台灯", "full 1", {"user id": "x"}),  # NFKC turns the ideographic space into a space
        PersonaTask(2, "a2", "s2", "full 2", {"User_ID": " u1 "}),
        PersonaTask(3, "a3", "s3", "full 3", {"用户ID": "u3"}),
    ]
    groups = link_groups(tasks)
    assert sorted(g.task_ids for g in groups) == [(0, 1, 2), (3,)]


def test_manifest_hashes_are_of_compact_id_lists():
    import hashlib

    manifest = build_persona_splits(_split_tasks(30), seed=1, val_size=5, test_size=5)
    for entry in manifest["splits"].values():
        compact = json.dumps(entry["task_ids"], separators=(",", ":")).encode("ascii")
        assert entry["task_ids_sha256"] == hashlib.sha256(compact).hexdigest()
        assert entry["task_ids"] == sorted(entry["task_ids"])


def test_too_small_catalog_is_a_clear_error():
    with raises_kind(DataError, "invalid_split", match="too few for --test-size 400"):
        build_persona_splits(_split_tasks(10), test_size=400, val_size=400)
    with raises_kind(DataError, "invalid_split", match="cannot select exactly 3 test"):
        # one group of 5 tasks (all share a user) cannot give exactly 3
        build_persona_splits(
            [PersonaTask(i, f"a{i}", f"s{i}", f"f{i}", {"用户ID": "same"}) for i in range(5)],
            test_size=3, val_size=0, held_out_max_group_size=20,
        )


def test_catalog_without_persona_tasks_gets_empty_splits():
    manifest = build_persona_splits([], test_size=0, val_size=0)
    assert manifest["checks"]["persona_task_count"] == 0
    assert all(entry["task_ids"] == [] for entry in manifest["splits"].values())
