"""Episodes on Ray (``shopsimrl eval --ray [ADDRESS]``): the driver keeps the run directory, actors play episodes.

Each actor is one worker process that opens the prepared data directory once (its own ``ShopWorld``) and builds
its own runtime and model backend from the same :class:`EvalSettings` (a served model gets one client per worker).
It rebuilds the plan itself and must arrive at the driver's fingerprint, so a node that sees other data files,
another prompt or another skill bank is refused before any episode runs. The driver hands out at most
``concurrency`` episodes at a time and feeds the results to the local runner's waves (append, retry, summary), so a
Ray run and a local run of a deterministic policy write the same traces. Ray is imported only when used.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..agent.episode import EpisodeStats
from ..agent.runtime import EpisodeJob, failure_record
from ..errors import ConfigError, ShopSimError

RAY_EXTRA = "pip install 'shopsimrl[ray]'  (or: pip install 'ray>=2.9')"
ACTOR_RESTARTS = 2  # a worker that dies is restarted; its episodes in flight fail and go to the next wave


Builder = Callable[[Any, Any], tuple[Any, Any]]  # (settings, world) -> (plan, runtime)


def import_ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise ConfigError(f"--ray needs Ray, which is not installed: {RAY_EXTRA}", code="ray_unavailable") from exc
    return ray


class EpisodeWorker:
    """One Ray worker: its own world over the data files, its own runtime and backend (made a Ray actor later)."""

    def __init__(self, settings: Any, data_dir: str, driver_cwd: str, builder: Builder) -> None:
        from ..env.shop_env import ShopWorld

        # relative paths (skills, data) resolve as on the driver wherever that directory exists (local clusters)
        if Path(driver_cwd).is_dir():
            os.chdir(driver_cwd)
        self.plan, self.runtime = builder(settings, ShopWorld.shared(data_dir))

    def fingerprint(self) -> str:
        return str(self.plan.fingerprint)

    async def run(self, job: Mapping[str, Any]) -> dict[str, Any]:
        record: dict[str, Any] = await self.runtime.run(EpisodeJob(**job))
        return record

    def stats(self) -> dict[str, Any]:
        return dataclasses.asdict(self.runtime.stats)

    async def close(self) -> None:
        await self.runtime.close()


class RayEpisodePool:
    """The driver's side: actors, least-loaded dispatch, a failed record when a worker is lost."""

    def __init__(self, ray: Any, actors: list[Any], provenance: Mapping[str, Any], started_ray: bool) -> None:
        self.ray = ray
        self.actors = actors
        self.provenance = dict(provenance)
        self.started_ray = started_ray
        self._load = [0] * len(actors)

    @classmethod
    def start(cls, settings: Any, plan: Any, *, episodes: int, builder: Builder) -> RayEpisodePool:
        """Connect to (or start) Ray, start the workers and check that each one built the same plan.

        ``builder`` (``eval.runner.build``, pickled by reference) is passed in rather than imported, so this
        module does not import the runner that imports it.
        """
        ray = import_ray()
        started = connect(ray, settings.ray, num_cpus=settings.ray_cpus)
        try:
            cpus = int(ray.cluster_resources().get("CPU", 1)) or 1
            count = max(1, min(settings.concurrency, episodes, cpus))
            per_actor = -(-settings.concurrency // count)
            options: dict[str, Any] = {"num_cpus": 1, "max_concurrency": per_actor, "max_restarts": ACTOR_RESTARTS}
            env_vars = _forwarded_env(settings)
            if env_vars:
                options["runtime_env"] = {"env_vars": env_vars}
            remote = ray.remote(EpisodeWorker).options(**options)
            data_dir = settings.ray_data or str(Path(settings.data).resolve())
            actors = [remote.remote(settings, data_dir, os.getcwd(), builder) for _ in range(count)]
            seen = ray.get([actor.fingerprint.remote() for actor in actors])
        except ShopSimError:
            _stop(ray, started)
            raise
        except Exception as exc:
            _stop(ray, started)
            cause = _project_error(exc)
            if cause is not None:  # e.g. a worker's data directory that fails its checks: say that in one line
                raise ShopSimError(f"a Ray worker could not start: {cause}") from exc
            raise ConfigError(f"Ray workers could not start: {type(exc).__name__}: {exc}", code="ray_unavailable") from exc
        wrong = [fp for fp in seen if fp != plan.fingerprint]
        if wrong:
            _stop(ray, started)
            raise ShopSimError(
                f"a Ray worker built another plan ({wrong[0][:12]}…, driver {plan.fingerprint[:12]}…): every node "
                f"must see the same data directory files at {data_dir} (and the same skill bank)"
            )
        return cls(ray, actors, plan.provenance(), started)

    async def run(self, job: EpisodeJob) -> dict[str, Any]:
        index = min(range(len(self.actors)), key=lambda i: (self._load[i], i))
        self._load[index] += 1
        try:
            record: dict[str, Any] = await self.actors[index].run.remote(job.record())
            return record
        except Exception as exc:  # the worker died or the cluster went away: a technical failure, retried
            return failure_record(job, self.provenance, "ray_worker", exc)
        finally:
            self._load[index] -= 1

    def stats(self) -> EpisodeStats:
        total = EpisodeStats()
        try:
            parts = self.ray.get([actor.stats.remote() for actor in self.actors])
        except Exception:
            return total
        for part in parts:
            total.add(EpisodeStats(**part))
        return total

    async def close(self) -> None:
        try:
            await asyncio.gather(*(actor.close.remote() for actor in self.actors), return_exceptions=True)
        finally:
            for actor in self.actors:
                self.ray.kill(actor)
            _stop(self.ray, self.started_ray)


def connect(ray: Any, address: str | None, *, num_cpus: int | None = None) -> bool:
    """Use an initialised Ray, connect to ``address``, or start a local instance; True when this call started it."""
    if ray.is_initialized():
        return False
    try:
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            ray.init(num_cpus=num_cpus or os.cpu_count() or 1, include_dashboard=False, log_to_driver=False)
    except Exception as exc:
        where = f"the Ray cluster at {address}" if address else "a local Ray instance"
        raise ConfigError(f"could not start or reach {where}: {type(exc).__name__}: {exc}", code="ray_unavailable") from exc
    return True


def _project_error(exc: BaseException) -> str | None:
    """The project's own error inside a Ray actor failure (Ray reports it as text with the remote traceback)."""
    text = str(exc)
    start = text.rfind(_ERRORS_PREFIX)
    if start < 0:
        return None
    return text[start + len(_ERRORS_PREFIX):].split("\n", 1)[0].strip() or None


_ERRORS_PREFIX = "shopsimrl.errors."


def _forwarded_env(settings: Any) -> dict[str, str]:
    """The API key variable of a served model, so that workers on other nodes can read it too."""
    name = getattr(settings.model, "api_key_env", None) if settings.model is not None else None
    return {name: os.environ[name]} if name and name in os.environ else {}


def _stop(ray: Any, started: bool) -> None:
    if started:
        ray.shutdown()
