"""The slime adapter against a stand-in of slime's own types and rules (slime is not on PyPI).

The stand-in (tests/slime_standin.py) mirrors slime at commit 624b824a898ab0ec1fcb4d373004c7f3852bf515
(THUDM/slime, v0.3.1 line) field by field: ``Sample`` (with ``rollout_id``), ``DynamicFilterOutput``
(with ``keep_when_insufficient``), the rollout-id validation, the flattening and the train-data conversion.
Episodes are real: the in-process shop and the rollout core, with the oracle (or another built-in policy)
answering through a token-level generate function.
"""

from __future__ import annotations

import asyncio
import dataclasses
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import slime_standin as slime
from shopsimrl.agent import InProcessEnvironment
from shopsimrl.agent.policies import make_policy
from shopsimrl.env import ShopWorld
from shopsimrl.train import slime as adapter
from slime_standin import Sample
from toy import PolicyGenerate, ToyChatTokenizer

ARGS = SimpleNamespace(partial_rollout=False, group_rm=False, shopsim_max_steps=30, rollout_max_context_len=None,
                       grpo_std_normalization=True, reward_key="reward", n_samples_per_prompt=4)
SAMPLING = {"temperature": 0.6, "top_p": 1.0, "top_k": -1, "max_new_tokens": 4096}


def test_standin_names_the_commit_and_mirrors_the_sample_fields() -> None:
    assert slime.SLIME_COMMIT.startswith("624b824")
    names = [f.name for f in dataclasses.fields(Sample)]
    assert names[:3] == ["group_index", "index", "rollout_id"]
    assert {"tokens", "response_length", "loss_mask", "rollout_log_probs", "remove_sample", "status", "metadata",
            "reward", "teacher_log_probs", "session_id", "train_metadata"} <= set(names)
    assert [s.name for s in Sample.Status] == ["PENDING", "COMPLETED", "TRUNCATED", "ABORTED", "FAILED"]


@pytest.fixture()
def world(prepared_dir: Path) -> ShopWorld:
    return ShopWorld.from_data_dir(prepared_dir)


@pytest.fixture()
def shop(world: ShopWorld, monkeypatch):
    """slime's modules → the stand-in; the adapter's tokenizer/backend/environment → toy tokenizer, policy, shop."""
    slime.install(monkeypatch)
    tokenizer = ToyChatTokenizer()
    policy = {"name": "oracle"}
    adapter.configure(
        tokenizer=lambda args: tokenizer,
        # reasoning is sampled but not echoed into the history: the prompt stops extending, episodes fork
        backend=lambda args, params: PolicyGenerate(tokenizer, make_policy(policy["name"], world), reasoning=True),
        environment=lambda args: InProcessEnvironment(world),
    )
    yield tokenizer, policy
    adapter.configure(tokenizer=None, backend=None, environment=None)


def _sample(task: int, group: int = 0, index: int = 0, split: str = "train", rollout_id: int | None = None) -> Sample:
    line = adapter.task_lines([task], split)[0]
    return Sample(group_index=group, index=index, rollout_id=rollout_id, prompt=line["prompt"],
                  metadata=dict(line["metadata"]))


def _episode(sample: Sample, evaluation: bool = False, params: dict | None = None) -> Any:
    return asyncio.run(slime.generate_and_rm(ARGS, sample, dict(params or SAMPLING), adapter.generate,
                                             evaluation=evaluation))


def _group(task: int, group: int, n: int = 4) -> list[Any]:
    return [_episode(_sample(task, group=group, index=n * group + i)) for i in range(n)]


def test_every_segment_carries_the_rollout_id_and_the_output_is_always_a_list(shop) -> None:
    tokenizer, _ = shop
    out = _episode(_sample(0, index=3))
    assert isinstance(out, list) and len(out) == 4  # reasoning dropped from history: one segment per turn
    for k, s in enumerate(out):
        assert isinstance(s, Sample) and s.status is Sample.Status.COMPLETED
        assert s.rollout_id == 3 and s.metadata["segment"] == k
        assert len(s.loss_mask) == len(s.rollout_log_probs) == s.response_length
        assert s.tokens[len(s.tokens) - s.response_length:] == tokenizer.encode(s.response)
        assert s.reward["reward"] == s.reward["r_strict"] == 1.0
    # a rollout id set by the data source wins over the index
    assert {s.rollout_id for s in _episode(_sample(0, index=3, rollout_id=77))} == {77}


def test_a_slime_rollout_of_forked_episodes_validates_flattens_and_converts(shop) -> None:
    groups = [_group(task, group=g) for g, task in enumerate((0, 1))]
    flat = slime.flatten_rollout(groups)  # validate_rollout_id_annotated passes, flattening reaches Samples
    assert all(isinstance(s, Sample) for s in flat) and len(flat) > 8
    data = slime.convert_samples_to_train_data(ARGS, flat, adapter.normalize_grpo_by_prompt_and_rollout)
    assert len(set(data["rollout_ids"])) == 8  # one id per episode, not per segment
    assert all(len(m) == n for m, n in zip(data["loss_masks"], data["response_lengths"], strict=True))
    per_rollout: dict[int, set[float]] = {}
    for rid, reward in zip(data["rollout_ids"], data["rewards"], strict=True):
        per_rollout.setdefault(rid, set()).add(reward)
    assert all(len(v) == 1 for v in per_rollout.values())  # segments share their rollout's advantage


def test_the_old_shape_breaks_slime_and_the_new_one_does_not(shop) -> None:
    """The regressions the stand-in exists for: no rollout_id, and a bare Sample among lists."""
    out = _episode(_sample(0, index=0))
    for s in out:
        s.rollout_id = None
    with pytest.raises(AssertionError, match="rollout_id is unset"):
        slime.flatten_rollout([[out, out]])
    listed = _episode(_sample(0, index=1))
    with pytest.raises(TypeError):  # a bare Sample after a list: slime's flattening cannot iterate it
        slime.flatten_rollout([[listed, listed[0]]])
    flat = slime.flatten_rollout([[listed[0], listed]])  # a bare Sample first: flattening stops too early
    assert any(isinstance(s, list) for s in flat)
    with pytest.raises((AssertionError, AttributeError)):  # counts disagree / a list has no loss_mask
        slime.convert_samples_to_train_data(ARGS, flat, adapter.normalize_grpo_by_prompt_and_rollout)


def test_unscored_episode_is_a_removed_placeholder_that_converts(shop) -> None:
    adapter.configure(backend=lambda args, params: (lambda ids: (_ for _ in ()).throw(OSError("sglang down"))))
    out = _episode(_sample(0, index=5))
    assert isinstance(out, list) and len(out) == 1
    s = out[0]
    assert s.status is Sample.Status.ABORTED and s.remove_sample and s.rollout_id == 5
    assert s.metadata["shopsim_error"]["type"] == "OSError"
    data = slime.convert_samples_to_train_data(ARGS, out, lambda args, xs: ([0.0] * len(xs), [0.0] * len(xs)))
    assert data["loss_masks"] == [[0]]


def test_zero_spread_groups_are_kept_only_when_the_batch_would_run_short(shop) -> None:
    informative = [_episode(_sample(t, group=0, index=i)) for i, t in enumerate((0, 1, 2, 3))]
    assert len({s[0].reward["reward"] for s in informative}) > 1
    flat_zero = _group(0, group=1)
    assert len({s[0].reward["reward"] for s in flat_zero}) == 1
    out = adapter.fully_scored_group_filter(ARGS, flat_zero)
    assert isinstance(out, slime.DynamicFilterOutput)  # slime's own type when slime is importable
    assert not out.keep and out.keep_when_insufficient and out.reason == adapter.DROP_ZERO_SPREAD
    keep = adapter.fully_scored_group_filter(ARGS, informative)
    assert keep.keep and keep.reason is None
    # plenty of groups: the zero-spread one is dropped
    data, dropped = slime.select_groups(ARGS, [flat_zero, informative, informative], adapter.fully_scored_group_filter, 2)
    assert len(data) == 2 and dropped == [adapter.DROP_ZERO_SPREAD]
    # the batch would run short: slime keeps it (the reference rule)
    data, dropped = slime.select_groups(ARGS, [flat_zero, informative], adapter.fully_scored_group_filter, 2)
    assert len(data) == 2 and dropped == [] and data[0] is flat_zero
    # an unscored sibling: dropped even when short
    adapter.configure(backend=lambda args, params: (lambda ids: (_ for _ in ()).throw(OSError("down"))))
    broken = [*informative[:3], _episode(_sample(3, group=0, index=3))]
    out = adapter.fully_scored_group_filter(ARGS, broken)
    assert not out.keep and not out.keep_when_insufficient and out.reason == adapter.DROP_UNSCORED
    data, dropped = slime.select_groups(ARGS, [broken, informative], adapter.fully_scored_group_filter, 2)
    assert len(data) == 1 and dropped == [adapter.DROP_UNSCORED]


def test_evaluation_runs_the_same_episode_and_returns_one_sample(shop) -> None:
    params = {"temperature": 0.0, "top_p": 0.7, "top_k": 20, "max_new_tokens": 4096}  # eval settings are free
    results = [_episode(_sample(t, index=i, split="test"), evaluation=True, params=params)
               for i, t in enumerate((0, 1, 2, 3))]
    assert all(isinstance(r, list) and len(r) == 1 for r in results)
    report = slime.collect_eval(results, reward_key="reward")
    assert len(report["samples"]) == 4  # one reward per episode, not per segment
    assert report["rewards"] == [r[0].reward["r_strict"] for r in results]
    assert 0.0 < sum(report["rewards"]) < 4.0
    assert all(s.metadata["evaluation"] for s in report["samples"])


@pytest.mark.parametrize("args, params, sample, message", [
    ({"partial_rollout": True}, {}, {}, "partial rollout"),
    ({"group_rm": True}, {}, {}, "group-rm"),
    ({}, {"top_p": 0.95}, {}, "top_p"),
    ({}, {"top_k": 20}, {}, "top_k"),
    ({}, {}, {"split": "test"}, "only train"),
])
def test_training_guards(shop, args, params, sample, message) -> None:
    a = SimpleNamespace(**{**vars(ARGS), **args})
    s = _sample(0, split=sample.get("split", "train"))
    with pytest.raises(adapter.AdapterError, match=message):
        asyncio.run(adapter.generate(a, s, {**SAMPLING, **params}))


def test_without_slime_the_error_names_the_install(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "slime", None)
    adapter.configure(tokenizer=None)
    with pytest.raises(adapter.AdapterError, match="slime is not installed"):
        asyncio.run(adapter.generate(ARGS, _sample(0), dict(SAMPLING)))


def test_dialogue_lines_play_the_shopper_and_never_train_on_its_replies(world: ShopWorld, monkeypatch) -> None:
    """Dialogue mode (issue 16): ``task_lines(..., shopper="rule")`` puts the shopper in the sample metadata; the
    episode is the runtime's dialogue episode (same actions, same reward), the first user message is the
    shopper's opening, and every reply sits under loss mask 0 in the samples slime converts."""
    from dialogue_support import check_split, opening, questions, reference, replies

    slime.install(monkeypatch)
    tokenizer = ToyChatTokenizer()
    adapter.configure(tokenizer=lambda args: tokenizer,
                      backend=lambda args, params: PolicyGenerate(tokenizer, make_policy("dialogue-heuristic", world)),
                      environment=lambda args: InProcessEnvironment(world))
    args = SimpleNamespace(**{**vars(ARGS), "shopsim_max_steps": None})  # the episode's own limit: 40
    try:
        lines = adapter.task_lines([0, 1], "train", shopper="rule")
        assert [line["metadata"]["shopper"] for line in lines] == ["rule", "rule"]
        assert "shopper" not in adapter.task_lines([0])[0]["metadata"]
        with pytest.raises(adapter.AdapterError, match="unknown shopper"):
            bad = Sample(group_index=0, index=9, prompt="0", metadata={"task_id": 0, "shopper": "oracle"})
            asyncio.run(adapter.generate(args, bad, dict(SAMPLING)))
        groups = []
        for i, line in enumerate(lines):
            sample = Sample(group_index=i, index=i, prompt=line["prompt"], metadata=dict(line["metadata"]))
            out = asyncio.run(slime.generate_and_rm(args, sample, dict(SAMPLING), adapter.generate))
            task = line["metadata"]["task_id"]
            expected = reference(world, task, "dialogue-heuristic")
            assert all(s.status is Sample.Status.COMPLETED and s.metadata["shopper"] == "rule" for s in out)
            assert out[0].reward["reward"] == out[0].reward["r_strict"] == expected["final"]["reward"]
            assert out[0].metadata["shopsim_steps"] == len(expected["steps"])
            start, _, instruction = opening(world, task)
            first_prompt = tokenizer.decode(out[0].tokens[: len(out[0].tokens) - out[0].response_length])
            assert start in first_prompt and instruction not in first_prompt
            trained = "".join(tokenizer.decode([t for t, m in zip(s.tokens[-s.response_length:], s.loss_mask,
                                                                     strict=True) if m]) for s in out)
            untrained = "".join(tokenizer.decode([t for t, m in zip(s.tokens[-s.response_length:], s.loss_mask,
                                                                       strict=True) if not m]) for s in out)
            check_split(trained, untrained, questions([s["action"] for s in expected["steps"]]),
                        replies(expected["conversation"]))
            groups.append([out])
        flat = slime.flatten_rollout(groups)
        data = slime.convert_samples_to_train_data(args, flat, adapter.normalize_grpo_by_prompt_and_rollout)
        assert all(len(m) == n for m, n in zip(data["loss_masks"], data["response_lengths"], strict=True))
    finally:
        adapter.configure(tokenizer=None, backend=None, environment=None)


def test_slimes_abort_stops_the_episode_before_its_next_generate_call(shop, world: ShopWorld) -> None:
    """After slime sets ``GenerateState.aborted`` no further generate call is made: the running episode and the
    ones not yet started come back as unscored ABORTED placeholders (slime's abort does not wait on them)."""
    tokenizer, _ = shop
    state = slime.GenerateState(ARGS)
    calls: list[int] = []

    def backend(args: Any, params: Any) -> Any:
        inner = PolicyGenerate(tokenizer, make_policy("oracle", world))

        def generate(ids: list[int]) -> Any:
            calls.append(len(ids))
            if len(calls) == 2:
                state.aborted = True  # slime's abort() lands while turn 2 is being sampled
            return inner(ids)
        return generate

    adapter.configure(backend=backend)
    try:
        running = _episode(_sample(0, index=1))
        assert len(calls) == 2  # turn 3 was never requested
        assert running[0].status is Sample.Status.ABORTED and running[0].remove_sample
        assert running[0].metadata["shopsim_error"]["type"] == "RolloutError"
        later = _episode(_sample(0, index=2))
        assert len(calls) == 2 and later[0].status is Sample.Status.ABORTED
        assert later[0].metadata["shopsim_error"]["stage"] == "start"
    finally:
        state.reset()
    assert _episode(_sample(0, index=3))[0].status is Sample.Status.COMPLETED


def test_groups_are_admitted_whole_up_to_the_group_concurrency() -> None:
    """``shopsim_group_concurrency`` counts groups: all siblings of an admitted group run together, a further
    group waits for a whole group to finish."""
    gate = adapter.GroupGate(2)
    peak: list[int] = []
    running: dict[int, int] = {}

    async def sibling(group: int) -> None:
        await gate.enter(group)
        try:
            running[group] = running.get(group, 0) + 1
            peak.append(len([g for g, n in running.items() if n]))
            await asyncio.sleep(0.01 * (group + 1))
            running[group] -= 1
        finally:
            gate.leave(group)

    async def main() -> None:
        await asyncio.gather(*(sibling(g) for g in range(4) for _ in range(4)))

    asyncio.run(main())
    assert max(peak) == 2 and gate.groups_in_flight == 0
    assert adapter._gate(SimpleNamespace(shopsim_group_concurrency=3)).limit == 3
    assert adapter._gate(SimpleNamespace(shopsim_episode_concurrency=16, n_samples_per_prompt=8)).limit == 2
    assert adapter._gate(SimpleNamespace()).limit == adapter.DEFAULT_GROUP_CONCURRENCY


def test_the_sglang_backend_reuses_one_http_client_per_worker() -> None:
    """Every turn of every episode on a worker's event loop goes through one pooled client."""
    from fastapi import FastAPI

    from live_server import serve

    app = FastAPI()

    @app.post("/generate")
    async def generate_route(body: dict) -> dict:
        return {"meta_info": {"output_token_logprobs": [[-0.5, 7, "x"]], "finish_reason": {"type": "stop"}}}

    with serve(app) as url:
        host, port = url.rsplit(":", 1)
        args = SimpleNamespace(sglang_router_ip=host.split("//")[1], sglang_router_port=int(port))

        async def main() -> set[int]:
            seen = set()
            for _ in range(3):
                out = await adapter.sglang_backend(args, {"temperature": 1.0})([1, 2, 3])
                assert list(out.token_ids) == [7]
                seen.add(id(next(iter(adapter._CLIENTS.values()))))
            return seen

        assert len(asyncio.run(main())) == 1


@given(cap=st.integers(1, 50_000), budget=st.integers(1, 50_000), prompt=st.integers(0, 60_000))
def test_each_turns_max_new_tokens_fits_the_context_left(cap: int, budget: int, prompt: int) -> None:
    """slime's per-turn cap never asks for more than the context budget leaves (and never for nothing)."""
    n = adapter.turn_max_new_tokens({"max_new_tokens": cap}, budget, prompt)
    assert n == max(1, min(cap, budget - prompt))
    assert prompt + n <= budget or n == 1


def test_the_sglang_backend_caps_max_new_tokens_by_the_context_left() -> None:
    """A 22,000-token prompt under the 24,576 budget: SGLang is asked for 2,576 tokens, not slime's 4,096."""
    from fastapi import FastAPI

    from live_server import serve

    app = FastAPI()
    asked: list[int] = []

    @app.post("/generate")
    async def generate_route(body: dict) -> dict:
        asked.append(body["sampling_params"]["max_new_tokens"])
        return {"meta_info": {"output_token_logprobs": [[-0.5, 7, "x"]], "finish_reason": {"type": "stop"}}}

    with serve(app) as url:
        host, port = url.rsplit(":", 1)
        args = SimpleNamespace(sglang_router_ip=host.split("//")[1], sglang_router_port=int(port),
                               rollout_max_context_len=24576)
        backend = adapter.sglang_backend(args, {"temperature": 1.0, "max_new_tokens": 4096})

        async def main() -> None:
            await backend([1] * 100)
            await backend([1] * 22_000)

        asyncio.run(main())
    assert asked == [4096, 24576 - 22_000]


def test_evaluation_samples_are_bounded_by_the_group_gate(shop, world: ShopWorld) -> None:
    """slime's evaluation samples carry ``group_index=None``: each is its own group, so at most
    ``shopsim_group_concurrency`` of them run at once (they used to share one unbounded group)."""
    tokenizer, _ = shop
    running: list[int] = [0]
    peak: list[int] = []

    def backend(args: Any, params: Any) -> Any:
        inner = PolicyGenerate(tokenizer, make_policy("oracle", world))

        async def generate(ids: list[int]) -> Any:
            running[0] += 1
            peak.append(running[0])
            await asyncio.sleep(0.005)
            running[0] -= 1
            return inner(ids)
        return generate

    args = SimpleNamespace(**{**vars(ARGS), "shopsim_group_concurrency": 2})
    adapter.configure(backend=backend)

    async def main() -> list[Any]:
        samples = [_sample(t % 2, index=t) for t in range(6)]
        for s in samples:
            s.group_index = None
        return await asyncio.gather(*(slime.generate_and_rm(args, s, dict(SAMPLING), adapter.generate,
                                                            evaluation=True) for s in samples))

    out = asyncio.run(main())
    assert len(out) == 6 and max(peak) == 2 and adapter._gate(args).groups_in_flight == 0


def test_an_all_protocol_error_rollout_raises_the_alarm_in_slimes_rollout_metrics(monkeypatch) -> None:
    slime.install(monkeypatch)
    samples = [Sample(group_index=0, index=i, rollout_id=i, metadata={"shopsim_turns": 3, "shopsim_protocol_errors": 3})
               for i in range(4)]
    args = SimpleNamespace(custom_rollout_log_function_path="shopsimrl.train.slime.log_rollout_health")
    slime.LOGGED.clear()
    slime.log_rollout_data(5, args, samples, {}, 1.0)
    ((logged),) = slime.LOGGED
    assert logged == {"shop/protocol_error_rate": 1.0, "shop/protocol_error_alarm": 1.0, "rollout/step": 5}
