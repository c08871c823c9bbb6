"""Agents: the chat runtime that plays episodes with a model, and the built-in policy interface it shares."""

from .episode import Episode, EpisodeHooks, EpisodeRequest, EpisodeStats, run_episode
from .page_text import Page, PageItem, parse_page
from .play import EpisodeOutcome, play_episode
from .policy import Policy, PolicyAction, PolicyContext, PolicyError, Turn, context_from_messages
from .runtime import (
    AgentRuntime,
    AsyncEnv,
    EnvironmentFactory,
    EpisodeJob,
    InProcessEnvironment,
    ModelBackend,
    RuntimeConfig,
    ServiceEnvironment,
    as_async_env,
)

__all__ = [
    "AgentRuntime",
    "AsyncEnv",
    "EnvironmentFactory",
    "Episode",
    "EpisodeHooks",
    "EpisodeJob",
    "EpisodeOutcome",
    "EpisodeRequest",
    "EpisodeStats",
    "InProcessEnvironment",
    "ModelBackend",
    "Page",
    "PageItem",
    "Policy",
    "PolicyAction",
    "PolicyContext",
    "PolicyError",
    "RuntimeConfig",
    "ServiceEnvironment",
    "Turn",
    "as_async_env",
    "context_from_messages",
    "parse_page",
    "play_episode",
    "run_episode",
]
