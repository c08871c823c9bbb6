"""The CPU recipe's settings (:class:`RecipeConfig`) and presets, below every stage module of the recipe
(``cpu_demo``, ``cpu_demo_sft``, ``cpu_demo_grpo``, ``cpu_demo_eval``, ``cpu_demo_run``), so they import it and
not each other."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import ConfigError

STAGES = ("init", "demos", "sft", "grpo", "eval", "report")


@dataclass(frozen=True)
class RecipeConfig:
    """Every knob of the recipe (``config.json`` records it next to the checkpoints)."""

    data: str
    out: str
    seed: int = 0
    preset: str = "cpu"  # the recipe preset's name (cpu, smoke, gpu), as the report names it
    model_preset: str = "cpu"  # the model and tokenizer size (local_lm.PRESETS)
    threads: int = 2
    use_cpu: bool = True  # False: the accelerator transformers finds (the gpu preset), bf16 where CUDA has it
    # concurrent turns decoded as one batch (batched_generate.BatchedGenerate) in GRPO rollouts (grpo_concurrency
    # episodes at once) and evaluation (eval_concurrency requests); off: one turn at a time, prefix-cached (CPU)
    batched_decoding: bool = False
    grpo_concurrency: int = 1
    tokenizer_products: int = 6000
    # demonstrations (public-information policies only)
    demo_policies: tuple[str, ...] = ("heuristic", "strong")
    demo_train_tasks: int | None = None  # None: the whole persona train split
    demo_standard_tasks: int = 600  # a seeded sample of the standard (no persona) split
    demo_min_reward: float = 1.0
    # context: turns per episode and the prompt cap (tokens), the same in training and evaluation. 6144 holds
    # 97% of the demonstrated episodes whole (median 4,460 tokens; 87% are longer than 4096, which would end them
    # as generation_length before the buy)
    max_turns: int = 8
    max_context: int = 6144
    max_new_tokens: int = 64
    # "required": every turn is one call of the page's tools, decoded under their schemas (a click is one of the
    # page's values), in GRPO rollouts and evaluation alike: what vLLM does for tool_choice="required"
    tool_choice: str = "required"
    # SFT copy curriculum, before the phases below: steps on the request and the first call alone (batch 16),
    # then on the full first-turn prompt and the first call (batch 2). A model made from scratch does not learn
    # to copy the request into its query from behind ~1,200 tokens of rules, persona and tool schemas; short
    # rows first, then the full prompt, teach it (benchmarks/bench_cpu_copy.py: 2 → 30 of 40 first queries)
    sft_short_steps: int = 500
    sft_first_steps: int = 600
    # SFT: one episode per step (~1.4 s on 2 quiet cores). Then ``sft_lm_steps`` with the loss on every token
    # (the page text teaches a model made from scratch to copy: the results page echoes the query, the product
    # page repeats the listing's id), then ``sft_steps`` with the loss on the assistant tokens only
    sft_lm_steps: int = 500
    sft_steps: int = 600
    sft_batch: int = 1
    sft_lr: float = 3e-3
    # the share of the assistant phase's rows that are first-turn prefixes (request → search call), mixed with
    # whole episodes, so that training on whole episodes keeps the copy the curriculum taught
    sft_first_turn_share: float = 0.5
    sft_minutes: float | None = None  # a wall-clock cap per SFT phase: it stops after the step that crosses it
    # GRPO: ~37 s per step on 2 quiet cores (rollouts ~22 s, the update the rest); 50 steps (31 min) keep the
    # whole recipe within 2 h (measured 1.46 h), where SFT took 23 min and evaluating SFT, GRPO and SFT-auto on
    # 400 tasks 33 min
    grpo_steps: int = 50
    group_size: int = 4
    groups_per_step: int = 2
    grpo_lr: float = 5e-4
    temperature: float = 0.8
    grpo_minutes: float | None = None
    # dynamic sampling (DAPO): a step rolls out groups until ``groups_per_step`` have reward spread (at most
    # ``grpo_max_groups`` groups; None: 4 × groups_per_step) and updates on those; off: the first groups drawn
    grpo_dynamic: bool = True
    grpo_max_groups: int | None = None
    # the GRPO task stream's difficulty tiers (None: every train task). The SFT checkpoint scores on ~1% of val
    # tasks, so most groups of random train tasks have no reward spread (v8.1: 11 of 154 sampled); train tasks a
    # public-information policy solves ("first,heuristic", ~40% of train) are where its groups can differ.
    # The catalog's tiers are computed once if missing (`shopsimrl data tiers`)
    grpo_difficulty: str | None = "first,heuristic"
    # evaluation (persona val split, through the runtime a served model uses)
    eval_split: str = "val"
    eval_tasks: int | None = None  # None: the whole split (400)
    eval_temperature: float = 0.6
    eval_concurrency: int = 4
    eval_unconstrained: bool = True  # also evaluate the SFT checkpoint with tool_choice="auto" (row sft-auto)
    # also evaluate the random-init model (row init, ~17 min on 2 cores); the `random` policy row is always there
    eval_init: bool = False
    stages: tuple[str, ...] = STAGES
    timings: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not 0.0 <= self.sft_first_turn_share < 1.0:  # checked before any stage runs, not when SFT starts
            raise ConfigError(f"sft_first_turn_share must be in [0, 1), not {self.sft_first_turn_share}", code="recipe")
        if self.group_size < 2:
            raise ConfigError("GRPO needs a group size of at least 2 (4 or more recommended)", code="recipe")
        unknown = set(self.stages) - set(STAGES)
        if unknown:
            raise ConfigError(f"unknown stage(s) {sorted(unknown)}; choose from {list(STAGES)}", code="recipe")
        from ..agent.model_client import TOOL_CHOICES

        if self.tool_choice not in TOOL_CHOICES:
            raise ConfigError(f"tool_choice must be one of {TOOL_CHOICES}, not {self.tool_choice!r}", code="recipe")
        if self.grpo_max_groups is not None and self.grpo_max_groups < self.groups_per_step:
            raise ConfigError(f"grpo_max_groups ({self.grpo_max_groups}) must be at least groups_per_step "
                              f"({self.groups_per_step})", code="recipe")
        if self.grpo_difficulty is not None:
            from ..catalog.tiers import parse_difficulty

            parse_difficulty(self.grpo_difficulty)


SMOKE = dict(preset="smoke", model_preset="tiny", grpo_max_groups=3, tokenizer_products=300, demo_train_tasks=12, demo_standard_tasks=4, max_turns=6, max_context=4096,
             sft_short_steps=1, sft_first_steps=1, sft_lm_steps=2, sft_steps=4, sft_batch=2, grpo_steps=2, group_size=2, groups_per_step=2, eval_tasks=4,
             max_new_tokens=48, demo_min_reward=0.0, grpo_difficulty=None, eval_init=True)
GPU = dict(preset="gpu", model_preset="gpu", use_cpu=False, batched_decoding=True, grpo_concurrency=16, threads=16, sft_lm_steps=300, sft_steps=300, sft_batch=8, grpo_steps=40, group_size=8,
           groups_per_step=2, grpo_lr=2e-4, sft_lr=1e-3, eval_concurrency=32, max_turns=8, max_context=8192,
           demo_train_tasks=None, demo_standard_tasks=2000)
