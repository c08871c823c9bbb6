"""Run an evaluation plan: bounded async concurrency, append-only traces, resume and retry waves.

Completed episodes already in the run directory are skipped; the others run in waves, and an episode that
failed for a technical reason (an exception recorded with its stage) is retried up to twice more. Each finished
attempt is appended to ``traces.jsonl`` at once, so a killed evaluator resumes where it stopped without losing
or duplicating a completed episode.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..agent.builtin_backend import BuiltinPolicyModel, policy_label
from ..agent.context import DEFAULT_CONTEXT_BUDGET
from ..agent.model_client import ModelSettings, OpenAIChatModel
from ..agent.prompt import SYSTEM_PROMPT, prompt_identity
from ..agent.runtime import (
    AgentRuntime,
    EnvironmentFactory,
    EpisodeJob,
    InProcessEnvironment,
    ModelBackend,
    RuntimeConfig,
    ServiceEnvironment,
)
from ..agent.skills import NO_SKILLS, SkillBank
from ..catalog.store import Catalog
from ..catalog.tiers import TIERS_FILE, filter_by_difficulty, read_tiers, stored_tiers
from ..contract import MULTI_TURN, SHOPPER_NAMES, SINGLE_TURN
from ..dialogue.llm_shopper import LLMShopperSettings, ShopperEndpoint
from ..dialogue.reply_cache import CACHE_DIRNAME
from ..env.shop_env import ShopWorld
from ..errors import ShopSimError
from ..stamps import generator_version, plan_stamps
from ..versions import (
    DIALOGUE_OBSERVATION_VERSION,
    DIALOGUE_TOOL_VERSION,
    ENVIRONMENT_VERSION,
    EPISODE_LIMITS,
    OBSERVATION_VERSION,
    TOOL_VERSION,
)
from .clusters import plan_clusters, summary_intervals
from .plan import DEFAULT_EVAL_SEED, EvalPlan, build_jobs
from .ray_runner import RayEpisodePool, import_ray
from .repeats import noise_source
from .rundir import RunDir, describe_unparseable, is_completed, write_json_atomic
from .summary import summarize, tier_summary

MAX_ATTEMPTS = 3  # one run plus two retries of a technically failed episode
ProgressCallback = Callable[[dict[str, Any]], None]


class EpisodeRunner(Protocol):
    """What plays one episode for :func:`run_jobs`: an ``AgentRuntime`` or a ``RayEpisodePool``."""

    async def run(self, job: EpisodeJob) -> dict[str, Any]: ...


@dataclass
class EvalSettings:
    """Everything ``shopsimrl eval`` takes (see the CLI for the flags)."""

    data: str
    out: str
    split: str = "test"
    policy: str | None = None
    model: ModelSettings | None = None
    env_url: str | None = None
    concurrency: int = 32
    repeats: int = 1
    limit: int | None = None
    sample_size: int | None = None
    seed: int = DEFAULT_EVAL_SEED
    max_steps: int = EPISODE_LIMITS[SINGLE_TURN]
    persona: bool | None = None
    shopper: str | None = None  # dialogue mode: "rule" or "llm"; recorded in the plan so runs never mix
    shopper_llm: LLMShopperSettings | None = None  # the LLM shopper's endpoint (in process; its cache: the run dir)
    skills: str | None = None
    experiment: str | None = None
    env_timeout: float = 30.0
    threaded_env: bool | None = None
    ray: str | None = None  # None: local; "": start a local Ray instance; else the address to connect to
    ray_cpus: int | None = None  # CPUs of a local Ray instance (default: all)
    ray_data: str | None = None  # the data directory as the Ray workers see it (default: ``data``, absolute)
    difficulty: tuple[str, ...] | None = None  # only tasks of these tiers (DATA/difficulty_tiers.json)
    # the episode's context budget (docs/training.md, "Context policy"; 0: none); None: the reference's 24,576
    # for a served model, none for a built-in policy (it has no context window)
    context_budget: int | None = None

    def __post_init__(self) -> None:
        if (self.policy is None) == (self.model is None):
            raise ShopSimError("choose exactly one of --policy NAME or --base-url URL --model NAME")
        if self.concurrency < 1:
            raise ShopSimError("concurrency must be at least 1")
        if self.max_steps < 1:
            raise ShopSimError("max_steps must be at least 1")
        if self.context_budget is not None and self.context_budget < 0:
            raise ShopSimError("context_budget must be 0 (none) or a number of tokens")
        if self.shopper is not None and self.shopper not in SHOPPER_NAMES:
            raise ShopSimError(f"unknown shopper {self.shopper!r}; choose 'rule' or 'llm'")
        if self.shopper_llm is not None and (self.shopper != "llm" or self.env_url):
            raise ShopSimError("--shopper-base-url/--shopper-model go with --shopper llm in process; with --env-url "
                               "the service's own shopper answers (serve --shopper-base-url ...)")
        if self.shopper_llm is not None and self.ray is not None:
            raise ShopSimError("--shopper llm runs in process or against --env-url, not on Ray workers")
        if self.policy is not None and self.policy.startswith("dialogue-") and self.shopper is None:
            raise ShopSimError(f"--policy {self.policy} plays dialogue mode and needs a shopper to ask: add --shopper "
                               f"rule (or --shopper llm with --shopper-base-url/--shopper-model); for single-turn "
                               f"runs use --policy {self.policy.removeprefix('dialogue-')}")
        if self.shopper == "llm" and self.shopper_llm is None and not self.env_url:
            raise ShopSimError("--shopper llm needs --shopper-base-url URL and --shopper-model NAME")


@dataclass
class EvalResult:
    run_dir: RunDir
    plan: EvalPlan
    summary: dict[str, Any]
    ran: int = 0
    skipped: int = 0
    resumed: bool = False
    stats: Any = None
    extra: dict[str, Any] = field(default_factory=dict)


def _task_split(catalog: Catalog, data: str, split: str, persona: bool | None, ids: Sequence[int],
                difficulty: Sequence[str] | None = None, *, override: bool = False) -> dict[str, Any]:
    from ..agent.prompt import sha256_json

    out = {"name": split, "path": str(Path(data) / "task_splits.json"),
           "version": catalog.task_splits.get("version"), "persona": persona, "task_count": len(ids),
           "task_ids_sha256": sha256_json(list(ids))}
    if difficulty is not None:  # absent otherwise: plans made before tiers existed keep their fingerprints
        out["difficulty"] = list(difficulty)
    if override:  # --persona/--no-persona changed the split's own mode; absent otherwise (fingerprints unchanged)
        out["persona_override"] = True
    return out


def _persona(catalog: Catalog, split: str, requested: bool | None) -> tuple[bool | None, bool]:
    """The split's mode and whether ``--persona/--no-persona`` overrode it; None for a mixed split (``all``):
    each task then runs in its own mode. Standard mode on a persona split is allowed (every task has its full
    instruction: the scenarios' single-turn standard); persona mode on a standard split is not (its tasks have no
    persona)."""
    declared = catalog.split_is_persona(split)
    check_persona_request(split, declared, requested)
    if requested is not None:
        return requested, declared is not None and requested != declared
    return (None if declared is None else bool(declared)), False


def check_persona_request(split: str, declared: bool | None, requested: bool | None) -> None:
    if requested and declared is False:
        raise ShopSimError(f"split {split!r} holds standard tasks only (no persona): --persona cannot apply")


def environment_identity(
    catalog: Catalog, adapter: Mapping[str, Any], persona: bool | None, shopper: str | None = None,
    shopper_llm: LLMShopperSettings | None = None,
) -> dict[str, Any]:
    manifest = catalog.manifest
    out = {
        **adapter, "persona": persona, "interaction_mode": SINGLE_TURN,
        "environment_version": ENVIRONMENT_VERSION, "observation_version": OBSERVATION_VERSION,
        "tool_version": TOOL_VERSION,
        "catalog": {"data_sha256": manifest.get("output_data_sha256"),
                    "schema_version": manifest.get("schema_version")},
    }
    generator = generator_version(catalog.root, manifest)
    if generator is not None:  # a generated catalog; absent otherwise (plans of other catalogs keep their fingerprints)
        out["catalog"]["generator_version"] = generator
    if shopper is not None:  # dialogue mode: its own versions; absent otherwise (single-turn plans unchanged)
        out.update(interaction_mode=MULTI_TURN, shopper=shopper, dialogue_version=DIALOGUE_OBSERVATION_VERSION,
                   dialogue_tool_version=DIALOGUE_TOOL_VERSION)
    if shopper_llm is not None:  # the shopper's model and sampling: a resume never mixes two shoppers
        out["shopper_llm"] = shopper_llm.identity()
    return out


def build(settings: EvalSettings, world: ShopWorld | None = None) -> tuple[EvalPlan, AgentRuntime]:
    """The plan and the runtime for ``settings`` (opens the catalog, the model client and the env factory)."""
    world = world or ShopWorld.shared(settings.data)
    catalog = world.catalog
    ids: Sequence[int] = catalog.split(settings.split)
    if settings.difficulty is not None:
        ids = filter_by_difficulty(ids, read_tiers(settings.data), settings.difficulty)
        if not ids:
            raise ShopSimError(f"no task of split {settings.split!r} is in difficulty tiers "
                               f"{', '.join(settings.difficulty)}")
    persona, override = _persona(catalog, settings.split, settings.persona)
    jobs = build_jobs(ids, split=settings.split, seed=settings.seed, repeats=settings.repeats,
                      limit=settings.limit, sample_size=settings.sample_size)
    model: ModelBackend
    if settings.policy is not None:
        model = BuiltinPolicyModel.named(settings.policy, world)
    else:
        assert settings.model is not None
        model = OpenAIChatModel(settings.model)
    environment: EnvironmentFactory
    if settings.env_url:
        environment = ServiceEnvironment(settings.env_url, timeout=settings.env_timeout)
        environment.check_reachable()  # once, before the first episode
    else:
        threaded = settings.policy is None if settings.threaded_env is None else settings.threaded_env
        endpoint = None
        if settings.shopper_llm is not None:  # replies cached in the run directory: a rerun replays them
            cache = str(Path(settings.out) / CACHE_DIRNAME)
            endpoint = ShopperEndpoint(dataclasses.replace(settings.shopper_llm, cache_dir=cache))
            endpoint.check_reachable()  # once, before the first episode
        environment = InProcessEnvironment(world, threaded=threaded, llm_shopper=endpoint)
    bank = SkillBank.load(settings.skills) if settings.skills else None
    budget = settings.context_budget
    if budget is None:
        budget = DEFAULT_CONTEXT_BUDGET if settings.model is not None else 0
    config = RuntimeConfig(max_steps=settings.max_steps, persona=persona, prompt=SYSTEM_PROMPT,
                           shopper=settings.shopper, context_budget=budget or None)
    experiment = settings.experiment or Path(settings.out).name
    plan = EvalPlan.create(
        experiment=experiment, model=model.identity(),
        task_split=_task_split(catalog, settings.data, settings.split, persona, ids, settings.difficulty,
                               override=override), jobs=jobs,
        environment=environment_identity(catalog, environment.identity(), persona, settings.shopper,
                                         settings.shopper_llm),
        runtime={**config.identity(), "concurrency": settings.concurrency},
        prompt=prompt_identity(config.prompt), skills=bank.identity() if bank else dict(NO_SKILLS),
        seed=settings.seed,
    )
    runtime = AgentRuntime(model, environment, config=config, skills=bank, provenance=plan.provenance())
    return plan, runtime


async def run_jobs(
    runtime: EpisodeRunner, jobs: Sequence[EpisodeJob], run_dir: RunDir, *, concurrency: int,
    max_attempts: int = MAX_ATTEMPTS, on_record: ProgressCallback | None = None,
) -> int:
    """Run ``jobs`` in waves (failed ones again, at most ``max_attempts`` times); returns attempts made."""
    pending = list(jobs)
    attempts = 0
    for _ in range(max_attempts):
        if not pending:
            break
        queue: asyncio.Queue[EpisodeJob] = asyncio.Queue()
        for job in pending:
            queue.put_nowait(job)
        failed: list[EpisodeJob] = []

        async def worker(failed: list[EpisodeJob] = failed, queue: asyncio.Queue[EpisodeJob] = queue) -> None:
            while True:
                try:
                    job = queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                record = await runtime.run(job)
                run_dir.append(record)
                if not is_completed(record):
                    failed.append(job)
                if on_record is not None:
                    on_record(record)

        workers = [asyncio.create_task(worker()) for _ in range(min(concurrency, len(pending)))]
        try:
            await asyncio.gather(*workers)
        finally:
            for task in workers:
                task.cancel()
        attempts += len(pending)
        order = {job.episode_id: i for i, job in enumerate(jobs)}
        pending = sorted(failed, key=lambda job: order[job.episode_id])
    return attempts


def run_summary(
    plan: EvalPlan, run_dir: RunDir, records: Mapping[str, Mapping[str, Any]] | None = None
) -> dict[str, Any]:
    """The summary of a run directory (``records``: its latest records when already in memory)."""
    model = plan.plan["model"]
    label = policy_label(model["policy"]) if model.get("provider") == "builtin" else model.get("model")
    meta = {"experiment": plan.plan["experiment"], "plan_fingerprint": plan.fingerprint,
            "model_id": plan.plan["model_id"], "model_label": label, "split": plan.plan["task_split"]["name"]}
    ids = [job.episode_id for job in plan.jobs()]
    latest = run_dir.records() if records is None else records
    summary = summarize(latest, episode_ids=ids, meta=meta)
    summary["stamps"] = plan_stamps(plan.plan)
    completed = [latest[eid] for eid in ids if eid in latest and is_completed(latest[eid])]
    if completed:  # plain and clustered bootstrap intervals (eval/clusters.py)
        summary["intervals"] = summary_intervals(completed, plan_clusters(plan.plan))
    data_dir = Path(str(plan.plan["task_split"].get("path") or "")).parent
    document = stored_tiers(data_dir) if (data_dir / TIERS_FILE).is_file() else None
    if document is not None:  # the catalog's tiers are known: success per tier
        tiers = {int(task): tier for tier, tasks in document["tiers"].items() for task in tasks}
        wanted = set(ids)
        summary["by_difficulty"] = tier_summary([r for eid, r in latest.items() if eid in wanted], tiers)
    if "repeats" in summary:
        summary["repeats"]["noise_source"] = noise_source(model.get("provider") == "builtin",
                                                           plan.plan["environment"].get("shopper"))
    return summary


async def evaluate_async(
    settings: EvalSettings, *, world: ShopWorld | None = None, on_start: Callable[[int, int], None] | None = None,
    on_record: ProgressCallback | None = None, on_warning: Callable[[str], None] | None = None,
) -> EvalResult:
    """Run (or resume) ``settings``; ``on_warning`` hears of traces lines a resume had to skip."""
    if settings.ray is not None:
        import_ray()  # a clear error naming the extra before anything is written
    plan, runtime = build(settings, world)
    run_dir = RunDir(settings.out)
    resumed = run_dir.open_for(plan)
    latest = run_dir.records()
    extra: dict[str, Any] = {}
    if run_dir.unparseable_lines:
        extra["unparseable_trace_lines"] = list(run_dir.unparseable_lines)
        if on_warning is not None:
            on_warning(describe_unparseable(run_dir.traces_path, run_dir.unparseable_lines))
    done = {eid for eid, record in latest.items() if is_completed(record)}
    jobs = [job for job in plan.jobs() if job.episode_id not in done]
    if on_start is not None:
        on_start(len(plan.plan["jobs"]), len(plan.plan["jobs"]) - len(jobs))

    def remember(record: dict[str, Any]) -> None:
        latest[record["episode_id"]] = record
        if on_record is not None:
            on_record(record)

    runner: EpisodeRunner = runtime
    pool = None
    try:
        if settings.ray is not None and jobs:
            runner = pool = RayEpisodePool.start(settings, plan, episodes=len(jobs), builder=build)
            extra["ray_workers"] = len(pool.actors)
        with run_dir:
            attempts = await run_jobs(runner, jobs, run_dir, concurrency=settings.concurrency, on_record=remember)
    finally:
        await runtime.close()
        stats = runtime.stats
        if pool is not None:
            stats = pool.stats()
            await pool.close()
    summary = run_summary(plan, run_dir, latest)
    write_json_atomic(run_dir.summary_path, summary)
    return EvalResult(run_dir, plan, summary, ran=attempts, skipped=len(done), resumed=resumed,
                      stats=stats, extra=extra)


def evaluate(settings: EvalSettings, **kwargs: Any) -> EvalResult:
    return asyncio.run(evaluate_async(settings, **kwargs))


def parse_extra_body(text: str | None) -> dict[str, Any]:
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ShopSimError(f"--extra-body must be a JSON object: {exc}") from exc
    if not isinstance(value, dict):
        raise ShopSimError("--extra-body must be a JSON object")
    return value
