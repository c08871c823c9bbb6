"""Opening by reading (issue 14 items 1 and 3) and refusing tampered data (issue 13 item 7).

The equivalence test compares the stored open path (memory-mapped records, goals and postings) with the former
one (``Catalog.rebuilt``: parse and validate the cleaned archive, resolve every goal, rebuild the postings from
SQLite) on a generated catalog of 1,500 products: every goal, every product, the hits of a fixed query set and
every step of scripted, heuristic and random episodes must be identical. About 10 s of CI time, most of it
generating and preparing the catalog.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path

import pytest

from error_kinds import raises_kind
from shopsimrl.agent.policies.heuristic import HeuristicPolicy
from shopsimrl.agent.policies.oracle import OraclePolicy
from shopsimrl.agent.policies.random_policy import RandomPolicy
from shopsimrl.agent.policy import Policy, PolicyAction, PolicyContext, Turn
from shopsimrl.catalog import Catalog, PrepareOptions
from shopsimrl.catalog.integrity import STAMP_FILE
from shopsimrl.cli import main
from shopsimrl.env import ShopEnv, ShopWorld
from shopsimrl.errors import DataError
from shopsimrl.generate import GeneratorConfig
from shopsimrl.generate.default import build_default_catalog
from shopsimrl.search import SearchIndex

EQUIVALENCE_CONFIG = GeneratorConfig(products=1500, two_axis_products=45, persona_tasks=300)


@pytest.fixture(scope="module")
def generated_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("generated") / "default"
    build_default_catalog(out, seed=11, config=EQUIVALENCE_CONFIG, options=PrepareOptions(test_size=40, val_size=40))
    return out


@pytest.fixture(scope="module")
def worlds(generated_dir: Path) -> tuple[ShopWorld, ShopWorld]:
    return ShopWorld.from_data_dir(generated_dir), ShopWorld(Catalog.rebuilt(generated_dir))


def test_stored_goals_and_products_equal_the_rebuilt_ones(worlds: tuple[ShopWorld, ShopWorld]) -> None:
    stored, rebuilt = worlds[0].catalog, worlds[1].catalog
    assert stored.stored_search and not rebuilt.stored_search
    assert list(stored.goals) == list(rebuilt.goals)  # same ids in the same (build) order
    for task_id, goal in rebuilt.goals.items():
        assert stored.goals[task_id] == goal, task_id
        assert list(stored.goals[task_id]) == list(goal)  # key order too: goals are serialised as they are
    assert list(stored.products_by_asin) == list(rebuilt.products_by_asin)
    for asin, product in rebuilt.products_by_asin.items():
        assert stored.products_by_asin[asin] == product, asin
    assert stored.split("test") == rebuilt.split("test") and stored.split("all") == rebuilt.split("all")


def _queries(catalog: Catalog) -> list[str]:
    goals = [catalog.goals[t] for t in sorted(catalog.goals)[::7]]
    queries = [goal["instruction_simple"] for goal in goals] + [goal["name"][:8] for goal in goals]
    return [*queries, "usb-c 充电器", "Type-C", "的", "小吃车 煤气灶", "a b c", "不存在的词语组合"]


def test_stored_postings_rank_exactly_like_rebuilt_postings_and_sqlite(
    generated_dir: Path, worlds: tuple[ShopWorld, ShopWorld]
) -> None:
    stored = worlds[0].catalog.search_index
    rebuilt = worlds[1].catalog.search_index
    assert stored.backend == "postings" and rebuilt.backend == "postings", (stored.backend_reason, rebuilt.backend_reason)
    assert "stored" in stored.backend_reason
    with SearchIndex.open(generated_dir / "products.sqlite3", accelerate=False) as sqlite_only:
        for query in _queries(worlds[1].catalog):
            expected = rebuilt.search_uncached(query)
            assert stored.search_uncached(query) == expected, query
            assert sqlite_only.search_uncached(query) == expected, query


class _Scripted:
    """Search, open the first hit, click every option value it offers, go back, page on, buy: many page kinds."""

    name = "scripted"

    def act(self, context: PolicyContext) -> PolicyAction:
        turn = len(context.history)
        clicks = context.click_values()
        if context.search_offered and (turn == 0 or not clicks):
            return PolicyAction.search(context.instruction[turn % 5 : turn % 5 + 12], "s")
        script = ["next >", "< prev", None, "description", "< prev", "features", "< prev", None, "buy now"]
        wanted = script[min(turn - 1, len(script) - 1)]
        if wanted in clicks:
            return PolicyAction.click(wanted, "s")
        options = [c for c in clicks if "=" in c]
        if options:
            return PolicyAction.click(options[turn % len(options)], "s")
        asins = [c for c in clicks if c.isdigit()]
        return PolicyAction.click(asins[0] if asins else clicks[0], "s")


def _trace(env: ShopEnv, policy: Policy, task_id: int, persona: bool | None) -> list[dict]:
    steps = [env.reset(task_id, persona=persona, include_private_goal=True)]
    history: list[Turn] = []
    for _ in range(12):
        context = PolicyContext(
            instruction=steps[0]["task_instruction"], observation=steps[-1]["observation"], tools=env.tools(),
            persona=steps[0].get("user_persona") or {}, history=tuple(history), task_id=task_id, seed=task_id,
        )
        action = policy.act(context).canonical
        steps.append(env.step(action))
        history.append(Turn(action, steps[-1]["observation"]))
        if steps[-1]["done"]:
            break
    if not steps[-1].get("done"):
        steps.append(env.terminate("action_limit"))
    return steps


def test_every_observation_of_played_episodes_is_identical(worlds: tuple[ShopWorld, ShopWorld]) -> None:
    stored_world, rebuilt_world = worlds
    task_ids = sorted(rebuilt_world.catalog.goals)[::25]
    for make in (lambda w: HeuristicPolicy(), lambda w: RandomPolicy(), lambda w: _Scripted(), OraclePolicy):
        stored_policy, rebuilt_policy = make(stored_world), make(rebuilt_world)
        for task_id in task_ids:
            persona = None if task_id % 2 == 0 else False  # None: the task's own mode
            ours = _trace(stored_world.new_env(), stored_policy, task_id, persona)
            theirs = _trace(rebuilt_world.new_env(), rebuilt_policy, task_id, persona)
            assert ours == theirs, (type(stored_policy).__name__, task_id)


def test_opening_decodes_nothing_until_used(generated_dir: Path) -> None:
    catalog = Catalog.from_data_dir(generated_dir)
    products = catalog.products_by_asin
    assert products.product_at.cache_info().currsize == 0  # type: ignore[attr-defined]
    asin = next(iter(products))
    assert asin in products and products[asin].asin == asin
    assert products.product_at.cache_info().currsize == 1  # type: ignore[attr-defined]
    for missing in ("", "x" * 500, "no-such-asin", 12, None, "\ud800"):
        assert missing not in products
        with pytest.raises(KeyError):
            products[missing]  # type: ignore[index]
    task_id = next(iter(catalog.goals))
    first, second = catalog.goals[task_id], catalog.goals[task_id]
    assert first == second and first is not second  # a fresh dict: no session can alter another's goal
    assert True not in catalog.goals and -1 not in catalog.goals and 10**9 not in catalog.goals


def test_a_result_list_reads_records_and_a_product_page_makes_the_product(generated_dir: Path) -> None:
    """Listed products are shown from their records; the checked ``Product`` is made only when one is opened."""
    world = ShopWorld.from_data_dir(generated_dir)
    rebuilt = ShopWorld(Catalog.rebuilt(generated_dir))
    products = world.catalog.products_by_asin
    decoded = products.product_at.cache_info  # type: ignore[attr-defined]
    env, other = world.new_env(), rebuilt.new_env()
    task_id = sorted(world.catalog.goals)[3]
    env.reset(task_id, persona=False)
    other.reset(task_id, persona=False)
    query = f"search[{world.catalog.goals[task_id]['name'][:12]}]"
    listed = env.step(query)
    assert listed == other.step(query)
    asins = [a for a in listed["observation_state"]["actions"] if a in products]
    assert len(asins) >= 2 and decoded().currsize == 0  # ten products listed, none decoded
    for asin in asins[:2]:
        assert world.catalog.product_record(asin) == rebuilt.catalog.product_record(asin) == products[asin].raw
    assert decoded().currsize == 2
    opened = env.step(f"click[{asins[2]}]")
    assert opened == other.step(f"click[{asins[2]}]") and decoded().currsize == 3
    assert world.view(asins[2]).product == rebuilt.catalog.products_by_asin[asins[2]]
    with pytest.raises(KeyError):
        world.catalog.product_record("no-such-asin")


# ---------------------------------------------------------------- tampered or old data (issue 13 item 7)


@pytest.fixture()
def copy_dir(tmp_path: Path, prepared_dir: Path) -> Path:
    copy = tmp_path / "copy"
    shutil.copytree(prepared_dir, copy)
    Catalog.from_data_dir(copy)  # a first open checks every hash and leaves the stamp
    assert (copy / STAMP_FILE).is_file()
    return copy


def _refused(path: Path, name: str) -> None:
    with raises_kind(DataError, "data_integrity") as info:
        Catalog.from_data_dir(path)
    message = str(info.value)
    assert "\n" not in message and name in message, message


def test_an_edited_sqlite_row_is_refused(copy_dir: Path) -> None:
    connection = sqlite3.connect(copy_dir / "products.sqlite3")
    connection.execute("UPDATE products SET title = title || ' x' WHERE rowid = 1")
    connection.commit()
    connection.close()
    _refused(copy_dir, "products.sqlite3")


def test_a_same_size_edit_with_the_old_mtime_is_still_refused(copy_dir: Path) -> None:
    target = copy_dir / "products.sqlite3"
    before = target.stat()
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0x01
    target.write_bytes(bytes(data))
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))  # the stamp must not be fooled by mtime
    _refused(copy_dir, "products.sqlite3")


def test_a_cut_task_split_file_is_refused(copy_dir: Path) -> None:
    splits = json.loads((copy_dir / "task_splits.json").read_text("utf-8"))
    splits["splits"]["test"]["task_ids"] = splits["splits"]["test"]["task_ids"][:1]
    (copy_dir / "task_splits.json").write_text(json.dumps(splits, ensure_ascii=False, indent=2), "utf-8")
    _refused(copy_dir, "task_splits.json")


def test_edited_index_weights_are_refused(copy_dir: Path) -> None:
    manifest = json.loads((copy_dir / "index_manifest.json").read_text("utf-8"))
    manifest["field_weights"]["title"] = 30.0
    (copy_dir / "index_manifest.json").write_text(json.dumps(manifest, indent=2), "utf-8")
    connection = sqlite3.connect(copy_dir / "products.sqlite3")
    payload = json.loads(connection.execute("SELECT payload FROM manifest").fetchone()[0])
    payload["field_weights"]["title"] = 30.0
    connection.execute("UPDATE manifest SET payload = ?", (json.dumps(payload),))
    connection.commit()
    connection.close()
    _refused(copy_dir, "index_manifest.json")


@pytest.mark.parametrize("name", ["budgets.json", "records/goals.jsonl", "search/postings_pair_docs.npy"])
def test_a_deleted_file_is_refused(copy_dir: Path, name: str) -> None:
    (copy_dir / name).unlink()
    _refused(copy_dir, name)


def test_an_edited_goal_record_is_refused(copy_dir: Path) -> None:
    path = copy_dir / "records" / "goals.jsonl"
    path.write_bytes(path.read_bytes().replace(b'"price_upper":', b'"price_upper":1', 1))
    _refused(copy_dir, "goals.jsonl")


def test_the_cli_prints_one_line_naming_the_file(copy_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (copy_dir / "budgets.json").write_text("[]\n", "utf-8")
    assert main(["data", "search", str(copy_dir), "小吃车"]) != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "budgets.json" in err and "Traceback" not in err


def test_an_old_data_directory_is_refused_with_a_rerun_message(copy_dir: Path) -> None:
    manifest = json.loads((copy_dir / "manifest.json").read_text("utf-8"))
    del manifest["open_format"]
    manifest["prepare_version"] = "shopsimrl-prepare-v1"
    (copy_dir / "manifest.json").write_text(json.dumps(manifest), "utf-8")
    with raises_kind(DataError, "data_directory", match=r"older version.*re-run `shopsimrl data prepare"):
        Catalog.from_data_dir(copy_dir)


def test_a_manifest_that_is_not_json_is_refused(copy_dir: Path) -> None:
    (copy_dir / "manifest.json").write_text("{not json", "utf-8")
    with raises_kind(DataError, "data_file", match=r"manifest\.json is not valid JSON"):
        Catalog.from_data_dir(copy_dir)


def test_a_stamp_copied_with_the_directory_vouches_for_nothing(copy_dir: Path, tmp_path: Path) -> None:
    """A copy (shutil.copytree keeps mtimes and the stamp) has new inodes and ctimes: every file is hashed again,
    so a same-size edit with the old mtime in the copy is refused at its first open."""
    again = tmp_path / "again"
    shutil.copytree(copy_dir, again)
    target = again / "exclusions.json"
    before = target.stat()
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0x01
    target.write_bytes(bytes(data))
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))
    _refused(again, "exclusions.json")


def test_full_verification_ignores_the_stamp(copy_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stamp = json.loads((copy_dir / STAMP_FILE).read_text("utf-8"))
    target = copy_dir / "exclusions.json"
    target.write_text(target.read_text("utf-8").replace("asin", "asiN", 1), "utf-8")
    now = target.stat()
    stamp["exclusions.json"]["stat"] = [*stamp["exclusions.json"]["stat"][:2], now.st_size, now.st_mtime_ns, now.st_ctime_ns]
    (copy_dir / STAMP_FILE).write_text(json.dumps(stamp), "utf-8")  # a forged stamp hides the edit (by design:
    # someone who writes the directory on purpose can as well rewrite manifest.json; integrity.py says so) ...
    Catalog.from_data_dir(copy_dir)
    monkeypatch.setenv("SHOPSIMRL_VERIFY", "full")  # ... unless verification is forced to hash everything
    _refused(copy_dir, "exclusions.json")
