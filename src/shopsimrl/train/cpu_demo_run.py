"""Running the CPU recipe's stages: one invocation of ``shopsimrl train cpu-demo``, and the record of them all.

Stages may run in separate invocations (``--stages``); each appends to ``results.json`` ``invocations`` (and to
``config.json``, which also holds the last invocation's settings) the stages it ran, its arguments and the
wall time of each stage, so a total over a run is a sum the reader can check. ``--out`` must be empty, new or
an earlier cpu-demo run: a directory holding another kind of run (an eval run directory, say) is refused.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .cpu_demo import _timed, _torch_setup
from .cpu_demo_config import GPU, SMOKE, STAGES, RecipeConfig

KIND = "shopsimrl-cpu-demo"  # config.json's marker: this directory is a cpu-demo run
RESULT_STAGES = ("init", "demos", "sft", "grpo", "eval")


def check_out(out: Path) -> None:
    """Refuse an ``--out`` that holds something other than a cpu-demo run (new and empty directories are fine)."""
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is a file: choose a directory", code="recipe")
    if not out.is_dir() or not any(out.iterdir()):
        return
    config = out / "config.json"
    if config.is_file():
        try:
            settings = json.loads(config.read_text(encoding="utf-8"))
        except ValueError:
            settings = None
        # the marker, or an earlier version's config (no marker, but the recipe's own keys)
        if isinstance(settings, dict) and (settings.get("kind") == KIND or {"preset", "stages", "sft_steps"} <= set(settings)):
            return
    what = "an eval run (manifest.json)" if (out / "manifest.json").is_file() else "files of another kind"
    raise ConfigError(f"--out {out} holds {what}, not a cpu-demo run: choose a new or empty directory", code="recipe")


def _peak_mb(results: Mapping[str, Any]) -> float:
    """Peak resident memory over every invocation that wrote ``results`` (stages may run one by one)."""
    import resource

    now = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    return max(now, float(results.get("peak_rss_mb") or 0.0))


def _stage_functions() -> dict[str, Callable[[RecipeConfig], dict[str, Any]]]:
    from .cpu_demo import stage_demos, stage_grpo, stage_init, stage_sft
    from .cpu_demo_eval import stage_eval

    return {"init": stage_init, "demos": stage_demos, "sft": stage_sft, "grpo": stage_grpo, "eval": stage_eval}


def _write(path: Path, value: Any) -> None:
    path.write_text(json.dumps(value, indent=2, ensure_ascii=False), encoding="utf-8")


def run_recipe(cfg: RecipeConfig, arguments: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Run ``cfg.stages`` in order; ``arguments`` (what the command line gave) goes into the invocation record."""
    out = Path(cfg.out)
    check_out(out)
    results_path = out / "results.json"
    results: dict[str, Any] = json.loads(results_path.read_text()) if results_path.is_file() else {}
    if "report" in cfg.stages and not any(s in results or s in cfg.stages for s in RESULT_STAGES):
        raise ConfigError(f"nothing to report in {out}: no stage has run there (run the other stages first)", code="recipe")
    out.mkdir(parents=True, exist_ok=True)
    _torch_setup(cfg)
    invocation: dict[str, Any] = {"stages": [s for s in STAGES if s in cfg.stages],
                                  "arguments": dict(arguments or {}), "wall_s": {}, "total_s": 0.0}
    invocations: list[dict[str, Any]] = [*results.get("invocations", []), invocation]
    settings = {k: v for k, v in asdict(cfg).items() if k != "timings"}

    def record(total: float) -> None:
        invocation["total_s"] = round(total, 1)
        results["invocations"] = invocations
        results.setdefault("timings", {}).update(cfg.timings)
        results["peak_rss_mb"] = _peak_mb(results)
        _write(results_path, results)
        _write(out / "config.json", {"kind": KIND, **settings, "invocations": invocations})

    started = time.perf_counter()
    record(0.0)
    for name in cfg.stages:  # the settings each stage last ran with (stages can be rerun one by one)
        _write(out / f"config-{name}.json", settings)
    stages = _stage_functions()
    for name in STAGES:
        if name not in cfg.stages:
            continue
        if name == "report":
            from .cpu_demo_report import write_report

            _timed(cfg, name, lambda: write_report(out, results))
        else:
            results[name] = _timed(cfg, name, functools.partial(stages[name], cfg))
        invocation["wall_s"][name] = cfg.timings[name]
        record(time.perf_counter() - started)
    record(time.perf_counter() - started)
    if "report" in cfg.stages:  # the report's own time and the invocation's total are in it too
        from .cpu_demo_report import write_report

        write_report(out, results)
    return results


def config_from_args(args: Any) -> RecipeConfig:
    preset: dict[str, Any] = {"smoke": SMOKE, "gpu": GPU}.get(args.preset, {})
    cfg = RecipeConfig(data=args.data, out=args.out, seed=args.seed, **preset)
    overrides = {k: v for k, v in vars(args).items()
                 if k in RecipeConfig.__dataclass_fields__ and v is not None and k not in ("data", "out", "seed", "preset")}
    if overrides.get("grpo_difficulty") == "all":  # --difficulty all: every train task, no tier filter
        overrides["grpo_difficulty"] = None
    if args.stages:
        overrides["stages"] = tuple(s.strip() for s in args.stages.split(",") if s.strip())
    return replace(cfg, **overrides)


def given_arguments(args: Any) -> dict[str, Any]:
    """The command line's options as parsed (those left unset omitted): what an invocation record keeps."""
    return {k: v for k, v in sorted(vars(args).items()) if v is not None and not callable(v)
            and k not in ("command", "train_command")}
