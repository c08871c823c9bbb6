"""The ``eval``, ``compare``, ``report`` and ``policy-server`` commands (registered by ``shopsimrl.cli``)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ..agent.context import DEFAULT_CONTEXT_BUDGET
from ..agent.episode import turn_limit
from ..agent.model_client import TOOL_CHOICES
from ..agent.policies import POLICY_NAMES, policy_help, policy_spec
from ..agent.shopper_backend import SHOPPER_POLICY
from ..cli_data import add_data_argument, resolve_data
from ..cli_shared import episode_bars, positive_int
from ..contract import MULTI_TURN, SHOPPER_NAMES, SINGLE_TURN
from ..dialogue.llm_shopper import add_shopper_arguments, shopper_settings_from_args
from ..errors import ShopSimError
from ..versions import EPISODE_LIMITS


def cmd_eval(args: argparse.Namespace) -> int:
    from ..agent.builtin_backend import policy_label
    from ..agent.model_client import ModelSettings
    from ._console import LiveProgress, summary_table
    from .runner import EvalSettings, check_persona_request, evaluate, parse_extra_body

    model = None
    if args.base_url or args.model:
        if not (args.base_url and args.model):
            raise ShopSimError("--base-url and --model go together")
        model = ModelSettings(
            base_url=args.base_url, model=args.model, api_key_env=args.api_key_env, temperature=args.temperature,
            top_p=args.top_p, max_tokens=args.max_tokens, extra_body=parse_extra_body(args.extra_body),
            timeout=args.timeout, max_retries=args.max_retries, send_seed=args.send_seed,
            checkpoint_id=args.checkpoint_id, send_task_id=args.send_task_id, tool_choice=args.tool_choice,
        )
    elif args.send_task_id:
        raise ShopSimError("--send-task-id goes with --base-url (a served model)")
    from ..agent.skills import SkillBank
    from ..catalog.store import check_data_dir

    # mistakes are reported before the catalog is opened (seconds on the default catalog)
    args.data = resolve_data(args.data)
    declared = check_data_dir(args.data, args.split)
    check_persona_request(args.split, declared, args.persona)
    if args.scenarios:  # every scenario's mode, before the first one runs
        from .scenarios import parse_scenarios

        for scenario in parse_scenarios(args.scenarios):
            check_persona_request(args.split, declared, scenario.persona)
    if args.skills:
        SkillBank.load(args.skills)
    difficulty = _difficulty(args)
    out = args.out or (f"runs/{args.policy or args.model.replace('/', '_')}-{args.split}"
                       + ("-scenarios" if args.scenarios else ""))
    if args.scenarios and (args.persona is not None or args.max_steps):
        raise ShopSimError("--scenarios sets the mode and turn limit of each scenario: drop --persona/--max-steps")
    settings = EvalSettings(
        data=args.data, out=out, split=args.split, policy=args.policy, model=model, env_url=args.env_url,
        concurrency=args.concurrency, repeats=args.repeats, limit=args.limit, sample_size=args.sample_size,
        seed=args.seed, persona=args.persona, skills=args.skills, shopper=args.shopper,
        shopper_llm=shopper_settings_from_args(args),
        max_steps=turn_limit(MULTI_TURN if args.shopper else SINGLE_TURN, args.max_steps),
        experiment=args.experiment, ray=args.ray, ray_cpus=args.ray_cpus,
        ray_data=args.ray_data, difficulty=difficulty, context_budget=args.context_budget,
    )
    label = policy_label(args.policy) if args.policy else args.model
    console = _console()
    if args.scenarios:
        return _eval_scenarios(args, settings, label, console)
    if args.force:
        _clear_run_dir(Path(out))
    progress = LiveProgress(f"{label} · {args.split}", enabled=not args.no_progress)
    try:
        result = evaluate(settings, on_start=progress.start, on_record=progress.record, on_warning=_warn)
    finally:
        progress.stop()
    console.print(summary_table(result.summary, f"{label} on {args.split}"))
    first = _first_failure(result.run_dir.traces_path) if result.summary["counts"]["failed"] else None
    if first:
        print(f"first failure: {first}")
    if args.policy and policy_spec(args.policy).private_goal:
        print(f"note: {args.policy} reads the private goal — this is a solvability check, not a baseline")
    if result.extra.get("ray_workers"):
        print(f"ray:     {result.extra['ray_workers']} workers")
    print(f"traces:  {result.run_dir.traces_path}")
    print(f"summary: {result.run_dir.summary_path}")
    if not args.no_report:
        from .report import write_report

        paths = write_report(out)
        print(f"report:  {paths['html']}  ({paths['md']})")
    sys.stdout.flush()
    return 0 if result.summary["counts"]["failed"] == 0 else 1


def _difficulty(args: argparse.Namespace) -> tuple[str, ...] | None:
    """``--difficulty`` parsed; the catalog's tiers computed first if it has none yet (once per catalog)."""
    from ..catalog.tiers import parse_difficulty, stored_tiers

    wanted = parse_difficulty(args.difficulty)
    if wanted is not None and stored_tiers(args.data) is None:
        from ..agent.tier_cascade import ensure_tiers

        with episode_bars(False) as progress:
            ensure_tiers(args.data, progress=progress)
    return wanted


def _eval_scenarios(args: argparse.Namespace, base: Any, label: str, console: Any) -> int:
    """``eval --scenarios``: one run directory per scenario under ``--out``, then the four-scenario table."""
    from ._console import LiveProgress
    from .runner import evaluate
    from .scenarios import (
        parse_scenarios,
        scenario_settings,
        scenario_table,
        scenarios_terminal,
        write_scenarios,
    )

    chosen = parse_scenarios(args.scenarios)
    failed = 0
    for scenario in chosen:
        settings = scenario_settings(base, scenario)
        if args.force:
            _clear_run_dir(Path(settings.out))
        progress = LiveProgress(f"{label} · {scenario.title}", enabled=not args.no_progress)
        try:
            result = evaluate(settings, on_start=progress.start, on_record=progress.record, on_warning=_warn)
        finally:
            progress.stop()
        failed += result.summary["counts"]["failed"]
        if not args.no_report:
            from .report import write_report

            write_report(settings.out)
    table = scenario_table(base.out, chosen, label=f"{label} on {args.split}")
    console.print(scenarios_terminal(table))
    paths = write_scenarios(base.out, table)
    print(f"runs:    {', '.join(str(Path(base.out) / s.name) for s in chosen)}")
    print(f"table:   {paths['md']}  ({paths['html']}, {paths['json']})")
    sys.stdout.flush()
    return 0 if failed == 0 else 1


def _warn(message: str) -> None:
    print(f"shopsimrl: warning: {message}", file=sys.stderr, flush=True)



def _first_failure(traces: Path) -> str | None:
    """The first failed episode's error, so a dead endpoint shows its cause, not only a count of types."""
    from .rundir import latest_records

    for episode_id, record in sorted(latest_records(traces).items()):
        error = record.get("error") or {}
        if record.get("status") == "failed" and error:
            return (f"{episode_id}: {error.get('type', 'error')} at {error.get('stage', '?')}: "
                    f"{error.get('message', '')}")
    return None


def _clear_run_dir(root: Path) -> None:
    """Remove a run directory's own artifacts (and nothing else) so a new plan can start there."""
    from .rundir import RunDir

    RunDir(root).clear()


def _console() -> Any:
    from rich.console import Console

    return Console() if sys.stdout.isatty() else Console(width=120)


def cmd_compare(args: argparse.Namespace) -> int:
    from .compare import compare_runs, comparison_tables

    result = compare_runs(args.run_a, args.run_b, resamples=args.resamples, allow_partial=args.allow_partial,
                          allow_stamp_mismatch=args.allow_stamp_mismatch)
    if args.out:
        Path(args.out).write_text(json.dumps(result, ensure_ascii=False, indent=2, sort_keys=True) + "\n", "utf-8")
    if args.json:
        print(json.dumps(result, ensure_ascii=False, indent=2, sort_keys=True))
        return 0
    console = _console()
    for table in comparison_tables(result):
        console.print(table)
    for warning in result["alignment"]["warnings"]:
        console.print(f"[yellow]note:[/yellow] {warning}")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from .report import write_report

    paths = write_report(args.run, vs=args.vs, out=args.out, allow_partial=args.allow_partial,
                         allow_stamp_mismatch=args.allow_stamp_mismatch)
    print(f"report: {paths['html']}  ({paths['md']})")
    return 0


def cmd_policy_server(args: argparse.Namespace) -> int:
    import uvicorn

    from ..agent.policy_server import FaultConfig, create_policy_app
    from ..env.shop_env import ShopWorld

    faults = FaultConfig(
        rate=args.fault_rate, kinds=tuple(args.faults.split(",")) if args.faults else FaultConfig().kinds,
        seed=args.fault_seed, length_rate=args.length_rate,
    )
    from ..catalog.store import check_data_dir
    from ..server.edge import GuardedApp, guard_from_args, uvicorn_options
    from ..server.ports import check_port_free, check_port_range

    guard = guard_from_args(args)  # the same admission rules as serve (server/edge.py)
    check_port_range(args.port)  # before the catalog is opened (or built)
    args.data = resolve_data(args.data)
    check_data_dir(args.data)
    args.port = check_port_free(args.host, args.port)  # 0: the free port the kernel chose
    world = ShopWorld.from_data_dir(args.data)
    app = create_policy_app(world, policy=args.policy, faults=faults, model_name=args.model_name)
    print(f"[shopsimrl] policy server ({args.policy}) on http://{args.host}:{args.port}/v1", file=sys.stderr, flush=True)
    uvicorn.run(GuardedApp(app, guard), host=args.host, port=args.port, log_level="warning", **uvicorn_options(args))
    return 0


def add_commands(commands: Any) -> None:
    """Register the evaluation subcommands on the top-level subparsers object."""
    _add_eval(commands)
    _add_compare(commands)
    _add_report(commands)
    _add_policy_server(commands)


def _add_eval(commands: Any) -> None:
    """``eval``: the policy or served model, the split and task selection, the run's settings."""
    ev = commands.add_parser("eval", help="evaluate a built-in policy or a served model on a task split")
    add_data_argument(ev)
    ev.add_argument("--split", default="test", help="task split to evaluate (train, val, test, standard, all)")
    who = ev.add_mutually_exclusive_group()
    who.add_argument("--policy", choices=POLICY_NAMES, metavar="NAME",
                     help=f"built-in policy ({policy_help()})")
    who.add_argument("--base-url", help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1")
    ev.add_argument("--model", help="model name at --base-url")
    ev.add_argument("--api-key-env", help="environment variable holding the API key (none: no key)")
    ev.add_argument("--temperature", type=float, default=0.6, help="sampling temperature sent to the model")
    ev.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling top_p sent to the model")
    ev.add_argument("--max-tokens", type=int, default=4096, help="completion token limit per model turn")
    ev.add_argument("--extra-body", help='JSON merged into the request body, e.g. \'{"enable_thinking": true}\'')
    ev.add_argument("--timeout", type=float, default=180.0, help="seconds per model request")
    ev.add_argument("--max-retries", type=int, default=3, help="retries on 408/409/429/5xx and connection errors")
    ev.add_argument("--send-seed", action="store_true", help="send the per-turn seed to the model")
    ev.add_argument("--tool-choice", choices=TOOL_CHOICES, default="auto",
                    help="tool_choice sent with the tools: 'required' makes the server answer with a call "
                         "(vLLM and the checkpoint server then constrain decoding to the tools' schemas)")
    ev.add_argument("--checkpoint-id", help="recorded in the manifest, never sent")
    ev.add_argument("--env-url", help="use a `shopsimrl serve` service instead of the in-process environment")
    ev.add_argument("--concurrency", type=positive_int, default=32, help="episodes run at the same time")
    ev.add_argument("--ray", nargs="?", const="", default=None, metavar="ADDRESS",
                    help="run episodes on Ray workers (no ADDRESS: start a local instance; 'auto' or "
                         "ray://HOST:10001: connect); needs the `ray` extra")
    ev.add_argument("--ray-cpus", type=int, help="CPUs of the local Ray instance --ray starts (default: all)")
    ev.add_argument("--ray-data", help="the --data directory's path on the Ray nodes (default: the same, absolute)")
    ev.add_argument("--scenarios", metavar="all|NAMES",
                    help="ShopSimulator's four scenarios over the same tasks: 'all' or some of single-standard, "
                         "single-persona, multi-standard, multi-persona (one run directory each under --out, "
                         "then a table; multi-turn: --shopper, default rule; docs/scenarios.md)")
    ev.add_argument("--repeats", type=positive_int, default=1,
                    help="episodes per task with distinct sampling seeds: mean ± std over repeats, pass^k, "
                         "pass@k and the flip rate in the summary")
    ev.add_argument("--difficulty", metavar="TIERS",
                    help="only tasks of these difficulty tiers, comma-separated: first, heuristic, strong, none "
                         "(the first public-information policy that solves the task; `shopsimrl data tiers`)")
    ev.add_argument("--limit", type=positive_int, help="only the first N tasks of the split")
    ev.add_argument("--sample-size", type=positive_int, help="a seeded random sample of N tasks")
    ev.add_argument("--seed", type=int, default=20260830, help="run seed (per-turn seeds, --sample-size draw)")
    ev.add_argument("--max-steps", type=int, default=None,
                    help=f"turn limit (default {EPISODE_LIMITS[SINGLE_TURN]}; {EPISODE_LIMITS[MULTI_TURN]} with --shopper)")
    ev.add_argument("--context-budget", type=int, default=None, metavar="TOKENS",
                    help=f"per-episode context budget, estimated tokens: a next prompt that would not fit ends the "
                         f"episode with generation_length, scored (default {DEFAULT_CONTEXT_BUDGET} with --base-url, "
                         f"none with --policy; 0: none; docs/evaluation.md)")
    ev.add_argument("--shopper", choices=SHOPPER_NAMES, default=None,
                    help="dialogue mode: a simulated shopper the agent can ask (ask_user); the instruction is withheld "
                         "(llm: an LLM plays the shopper, --shopper-base-url/--shopper-model; replies cached in --out)")
    add_shopper_arguments(ev)
    ev.add_argument("--send-task-id", action="store_true",
                    help="send shopsim_task_id in each model request (for the policy server's oracle policies)")
    ev.add_argument("--persona", action=argparse.BooleanOptionalAction, default=None,
                    help="override the split's mode: --no-persona runs a persona split's tasks with their plain "
                         "instruction (recorded in the run plan as persona_override); --persona is refused on a "
                         "standard split (default: the split's own mode)")
    ev.add_argument("--skills", help="skill-bank JSON appended to the system message")
    ev.add_argument("--experiment", help="experiment name (default: the --out directory name)")
    ev.add_argument("--out", help="run directory (default runs/<policy-or-model>-<split>)")
    ev.add_argument("--no-progress", action="store_true", help="no live progress bar")
    ev.add_argument("--no-report", action="store_true", help="skip report.md/report.html")
    ev.add_argument("--force", action="store_true",
                    help="start over: remove this run directory's manifest, traces, summary and report first")
    ev.set_defaults(func=cmd_eval)


def _add_compare(commands: Any) -> None:
    cmp_ = commands.add_parser("compare", help="paired bootstrap comparison of two runs over the same tasks")
    cmp_.add_argument("run_a", help="run directory A (the baseline)")
    cmp_.add_argument("run_b", help="run directory B (differences are B - A)")
    cmp_.add_argument("--resamples", type=int, default=10_000, help="paired bootstrap resamples")
    cmp_.add_argument("--allow-partial", action="store_true", help="compare the tasks completed in both runs")
    cmp_.add_argument("--allow-stamp-mismatch", action="store_true",
                      help="compare runs on different version stamps (environment, generator, catalog, task set) "
                           "with a warning instead of refusing them (default: refuse)")
    cmp_.add_argument("--out", help="also write the comparison as JSON to this file")
    cmp_.add_argument("--json", action="store_true", help="print the comparison as JSON")
    cmp_.set_defaults(func=cmd_compare)


def _add_report(commands: Any) -> None:
    rep = commands.add_parser("report", help="report.md and report.html with figures for a run")
    rep.add_argument("run", help="run directory (written by eval)")
    rep.add_argument("--vs", help="a second run: add the paired differences (RUN - VS)")
    rep.add_argument("--allow-partial", action="store_true",
                     help="with --vs: pair only the episodes completed in both runs (else such a pair is refused)")
    rep.add_argument("--allow-stamp-mismatch", action="store_true",
                     help="with --vs: pair runs on different version stamps with a warning (default: refuse)")
    rep.add_argument("--out", help="output directory (default: the run directory)")
    rep.set_defaults(func=cmd_report)


def _add_policy_server(commands: Any) -> None:
    ps = commands.add_parser("policy-server", help="an OpenAI-compatible chat server driven by a built-in policy")
    add_data_argument(ps)
    ps.add_argument("--policy", default="heuristic",
                    choices=(*POLICY_NAMES, SHOPPER_POLICY), metavar="NAME",
                    help=f"a built-in policy ({', '.join(POLICY_NAMES)}; dialogue-heuristic / dialogue-oracle: for "
                         f"`eval --shopper rule`, dialogue-oracle needs eval --send-task-id) or {SHOPPER_POLICY}: a "
                         "scripted shopper for `eval --shopper llm`")
    ps.add_argument("--host", default="127.0.0.1", help="address to listen on")
    from ..server.ports import add_port_argument

    add_port_argument(ps, 8100)
    ps.add_argument("--model-name", help="the model id served (default shopsim-<policy>)")
    ps.add_argument("--fault-rate", type=float, default=0.0, help="share of requests answered with a protocol error")
    ps.add_argument("--faults", help="comma-separated fault kinds to draw from (default: all protocol errors)")
    ps.add_argument("--fault-seed", type=int, default=0, help="seed of the fault draw")
    ps.add_argument("--length-rate", type=float, default=0.0, help="share of requests cut off (finish_reason length)")
    from ..server.edge import add_edge_arguments

    add_edge_arguments(ps, max_body_bytes=16 << 20)  # a long episode's whole context is one request
    ps.set_defaults(func=cmd_policy_server)
