"""No silent zero-reward template (issue 25 item 4): every chat template TRL 1.16 bundles, in both modes,
either completes an oracle episode with a reward or fails loudly before the first episode.

"Silent" is what this guards against: an episode that completes with reward 0 because every turn was a protocol
error (the template renders no tool call, or one the project cannot read back). The tokenizer is a byte-level
BPE trained once on the fixture catalog; each case swaps in one template file as shipped
(``shopsimrl.testing.template_matrix``, which also runs the same matrix in the [verl] venv for the comparison).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl", reason="the train extra (transformers, trl, tokenizers) is not installed")

import trl

from shopsimrl.env import ShopWorld
from shopsimrl.testing import template_matrix
from shopsimrl.testing.template_matrix import LOUD, REWARDED, SILENT, run_case, template_files
from shopsimrl.train.health import batch_health, turn_counts

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE_DIR = Path(trl.__file__).parent / "chat_templates"
TEMPLATES = template_files(TEMPLATE_DIR, training=True)
# The model templates whose oracle episode is rewarded in both modes (and so is their *_training variant where TRL
# ships one), in every environment: the validator's <tool_call> JSON/XML, a think block the prompt opened, and
# tool_formats' parsers; every other template is refused loudly.
REWARDED_MODELS = {
    "diffusion_gemma", "gemma4", "gemma4_v2", "gemma4_v3", "gemma4_v4", "gemma4_v5", "glm4moe", "gptoss",
    "lfm2_2_5", "lfm2_2_5_v2", "lfm2_2_5_vl", "lfm2_v2", "llama3_1", "llama3_2", "nemotron_3_5_lightning",
    "nemotron_3_nano", "nemotron_3_super", "nemotron_3_ultra", "qwen2_5", "qwen3", "qwen3_5_nothink",
    "qwen3_5_think", "qwen3_6", "qwen3_8", "qwen3_instruct_2507", "qwen3_vl",
}


@pytest.fixture(scope="module")
def world(prepared_dir: Path) -> ShopWorld:
    return ShopWorld.from_data_dir(prepared_dir)


@pytest.fixture(scope="module")
def base_tokenizer(prepared_dir: Path) -> Any:
    return template_matrix.base_tokenizer(prepared_dir, TEMPLATES[0].read_text(encoding="utf-8"))


def test_the_matrix_covers_every_template_trl_bundles() -> None:
    assert len(TEMPLATES) >= 70 and any(p.stem == "deepseekv3" for p in TEMPLATES)


@pytest.mark.parametrize("mode", template_matrix.MODES)
@pytest.mark.parametrize("template", TEMPLATES, ids=lambda p: p.stem)
def test_every_template_is_rewarded_or_refused_loudly(world: ShopWorld, base_tokenizer: Any, template: Path,
                                                     mode: str) -> None:
    outcome, detail = run_case(world, base_tokenizer, template, mode)
    assert outcome != SILENT, (template.stem, detail)  # never a silent zero
    if outcome == LOUD:  # refused before the first episode naming the template, a raised call, an aborted episode
        assert detail
    assert (outcome == REWARDED) == (template.stem.removesuffix("_training") in REWARDED_MODELS), detail


def _verl_python() -> Path | None:
    """The [verl] venv's python: ``SHOPSIM_VERL_VENV`` (``make test`` sets it to the Makefile's VERL_VENV), else
    ``.venv-verl`` beside the sources; None when neither exists (a venv named but missing is a failure)."""
    named = os.environ.get("SHOPSIM_VERL_VENV")
    python = Path(named or ROOT / ".venv-verl") / "bin" / "python"
    if named and not python.exists():
        pytest.fail(f"SHOPSIM_VERL_VENV={named} has no bin/python")
    return python if python.exists() else None


def test_the_verl_environment_rewards_the_same_templates(prepared_dir: Path, tmp_path: Path) -> None:
    """The [verl] venv (transformers < 5.11, no TRL) runs the same matrix over the same template files: the same
    outcome for every one of the 144 runs (so the same rewarded set of the 82 model-template runs) and 0 silent."""
    python = _verl_python()
    if python is None:
        pytest.skip("no [verl] venv (make test builds it; or set SHOPSIM_VERL_VENV)")
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV",)}
    env["PYTHONPATH"] = str(ROOT / "src")  # this tree's code, whatever the venv's editable install points at
    probe = subprocess.run([str(python), "-c", "import importlib.util, transformers; "
                            "print(transformers.__version__, importlib.util.find_spec('trl') is None)"],
                           env=env, capture_output=True, text=True, timeout=120, check=True)
    version, no_trl = probe.stdout.split()
    assert no_trl == "True", f"the [verl] venv has TRL installed (transformers {version}): not the case tested"
    theirs_file, ours_file = tmp_path / "verl.json", tmp_path / "main.json"
    command = ["-m", "shopsimrl.testing.template_matrix", "--templates", str(TEMPLATE_DIR), "--data",
               str(prepared_dir), "--training", "--json"]
    done = subprocess.run([str(python), *command, str(theirs_file)], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert template_matrix.main([*command[2:], str(ours_file)]) == 0
    theirs, ours = (json.loads(f.read_text(encoding="utf-8")) for f in (theirs_file, ours_file))
    assert len(theirs) == len(ours) == 2 * len(TEMPLATES)
    differ = {key: (ours[key], theirs[key]) for key in ours if ours[key][0] != theirs[key][0]}
    assert not differ, differ
    assert SILENT not in {outcome for outcome, _ in theirs.values()}
    rewarded = {key.split("/")[0] for key, (outcome, _) in theirs.items() if outcome == REWARDED}
    assert {stem.removesuffix("_training") for stem in rewarded} == REWARDED_MODELS
    models = [key for key in theirs if not key.split("/")[0].endswith("_training")]
    assert len(models) == 82 and sum(theirs[key][0] == REWARDED for key in models) == 2 * len(REWARDED_MODELS)


def test_a_batch_of_protocol_errors_raises_the_warning_metric(caplog: pytest.LogCaptureFixture) -> None:
    steps = [{"sampled_tokens": 5, "protocol_error": {"code": "no_tool_call"}}] * 3
    assert batch_health([turn_counts(steps)] * 2, "test")["shop/protocol_error_alarm"] == 1.0
    assert "every model turn" in caplog.text
    mixed = [*steps, {"sampled_tokens": 5}]
    assert batch_health([turn_counts(mixed)], "test") == {"shop/protocol_error_rate": 0.75,
                                                           "shop/protocol_error_alarm": 0.0}
    assert batch_health([], "test")["shop/protocol_error_alarm"] == 0.0
