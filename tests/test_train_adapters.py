"""Adapters import without their trainer and say what to install (main environment: no verl, no slime).

The adapters themselves are tested against the trainers' code in test_train_verl.py (real verl 0.9.1, in its
own environment) and test_train_slime.py (a stand-in of slime at a named commit).
"""

from __future__ import annotations

import importlib
import sys

import pytest

from shopsimrl.train import verl as verl_adapter


@pytest.mark.parametrize("module, attribute, hint", [
    ("shopsimrl.train.verl", "ShopAgentLoop", r"verl is not installed: `pip install 'shopsimrl\[verl\]'`"),
])
def test_adapters_import_without_trainer_and_say_what_to_install(monkeypatch, module, attribute, hint) -> None:
    monkeypatch.setitem(sys.modules, "verl", None)  # make `import verl` fail even if it were installed
    mod = importlib.import_module(module)
    mod._CACHE.clear()
    with pytest.raises(verl_adapter.AdapterError, match=hint):
        getattr(mod, attribute)


@pytest.mark.parametrize("ids, log_probs, reason, want, finish", [
    ([5, 6, 7, 8], [-1.0] * 4, "completed", True, "length"),  # max_tokens reached, no end-of-turn: cut off
    ([5, 6, 7, 2], [-1.0] * 4, "completed", True, "stop"),  # max_tokens reached on the end-of-turn id
    ([5, 2], [-1.0] * 2, "completed", True, "stop"),
    ([5, 2], None, None, False, "stop"),  # no log-probs asked for: zeros for the core, None for verl
    ([], [], "aborted", True, "abort"),
])
def test_verl_token_output_to_generation(ids, log_probs, reason, want, finish) -> None:
    from types import SimpleNamespace

    out = SimpleNamespace(token_ids=ids, log_probs=log_probs, stop_reason=reason)
    gen = verl_adapter.token_output_to_generation(out, 4, (2,), want)
    assert gen.finish_reason == finish and list(gen.token_ids) == ids and len(gen.log_probs) == len(ids)


def test_verl_missing_log_probs_when_asked_is_an_error() -> None:
    from types import SimpleNamespace

    with pytest.raises(verl_adapter.AdapterError, match="no log-probs"):
        verl_adapter.token_output_to_generation(SimpleNamespace(token_ids=[1], log_probs=None), 4, (2,), True)


def test_task_builders_write_dialogue_sources_with_shopper(prepared_dir, tmp_path) -> None:
    """``--shopper rule`` on the verl and slime task builders (issue 16): the shopper travels in ``extra_info`` /
    ``metadata``, and a verl dialogue row does not carry the instruction that dialogue mode withholds."""
    import importlib.util
    import json
    from pathlib import Path

    import pyarrow.parquet as pq

    from shopsimrl.catalog import Catalog

    root = Path(__file__).resolve().parents[1] / "examples"

    def load(path: Path):
        spec = importlib.util.spec_from_file_location(f"example_{path.parent.name}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    load(root / "verl" / "build_tasks.py").main(["--data", str(prepared_dir), "--out", str(tmp_path / "v"),
                                                 "--shopper", "rule"])
    load(root / "slime" / "build_tasks.py").main(["--data", str(prepared_dir), "--out", str(tmp_path / "s"),
                                                  "--shopper", "rule"])
    catalog = Catalog.from_data_dir(prepared_dir)
    try:
        rows = pq.read_table(tmp_path / "v" / "train.parquet").to_pylist()
        assert rows and all(r["extra_info"]["shopper"] == "rule" for r in rows)
        for row in rows:
            instruction = catalog.goal(row["extra_info"]["task_id"])["instruction_text"]
            assert instruction not in json.dumps(row, ensure_ascii=False)
        plain = verl_adapter.task_rows(prepared_dir, "train")
        assert plain[0]["prompt"][0]["content"] == catalog.goal(plain[0]["extra_info"]["task_id"])["instruction_text"]
        assert "shopper" not in plain[0]["extra_info"]
    finally:
        catalog.close()
    lines = [json.loads(line) for line in (tmp_path / "s" / "train.jsonl").read_text("utf-8").splitlines()]
    assert lines and all(line["metadata"]["shopper"] == "rule" for line in lines)
    with pytest.raises(SystemExit):  # argparse refuses an unknown shopper
        load(root / "slime" / "build_tasks.py").main(["--data", str(prepared_dir), "--out", str(tmp_path / "x"),
                                                      "--shopper", "oracle"])
