"""The learned policy: a linear softmax over public features of each choice, trained by RL alone.

Each decision (:mod:`.learned_features`) scores its candidate actions with one weight vector per decision kind
and takes the best (ties: the first candidate, so the policy is deterministic); training samples from the
softmax instead (:mod:`shopsimrl.train.policy_gradient`). The shipped weights (``learned_weights.json``) were
trained from random initialisation on the persona train split of the default catalog, by policy gradient with
a group baseline and nothing else; they are bound to that catalog and refused on any other, because the
features' meaning (page layout, phrase lists) is the catalog's. ``$SHOPSIMRL_LEARNED_WEIGHTS`` names another
weights file (for example one written by ``shopsimrl train policy``).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ...contract import BACK_TO_SEARCH as BACK
from ...env.shop_env import ShopWorld
from ...errors import PolicyError
from ...stamps import catalog_stamps
from ..page_text import parse_page
from ..policy import PolicyAction, PolicyContext
from .learned_features import FEATURES, KINDS, Decision, decide

WEIGHTS_FORMAT = "shopsimrl-learned-policy-v1"
SHIPPED_WEIGHTS = Path(__file__).with_name("learned_weights.json")
WEIGHTS_ENV = "SHOPSIMRL_LEARNED_WEIGHTS"


def catalog_stamp(world: ShopWorld) -> dict[str, Any]:
    """What binds weights to a catalog: the prepared data's content hash and its task splits' hash."""
    manifest = world.catalog.manifest
    return {"output_data_sha256": catalog_stamps(world.catalog.root, manifest)["catalog_sha256"],
            "task_splits_sha256": manifest.get("task_splits_sha256")}


def _digest(features: Mapping[str, Any], weights: Mapping[str, Any]) -> str:
    text = json.dumps({"features": features, "weights": weights}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def zero_weights() -> dict[str, np.ndarray]:
    return {kind: np.zeros(len(FEATURES[kind])) for kind in KINDS}


@dataclass
class LinearModel:
    """One weight vector per decision kind over :data:`FEATURES` (float64)."""

    weights: dict[str, np.ndarray]
    meta: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def initial(cls, rng: np.random.Generator, scale: float = 0.01) -> LinearModel:
        """Small random weights (the policy starts near uniform over each decision's candidates)."""
        return cls({kind: rng.normal(0.0, scale, len(FEATURES[kind])) for kind in KINDS})

    def logits(self, decision: Decision) -> np.ndarray:
        out: np.ndarray = np.asarray(decision.features, dtype=np.float64) @ self.weights[decision.kind]
        return out

    def probabilities(self, decision: Decision) -> np.ndarray:
        logits = self.logits(decision)
        exp = np.exp(logits - logits.max())
        out: np.ndarray = exp / exp.sum()
        return out

    def best(self, decision: Decision, avoid: frozenset[str] = frozenset()) -> int:
        """The highest-scoring candidate, the first one among equals, passing over the actions in ``avoid`` while
        another candidate is left (a greedy policy would otherwise repeat a loop until the turn limit)."""
        logits = self.logits(decision)
        order = sorted(range(len(logits)), key=lambda i: (-logits[i], i))
        fresh = [i for i in order if decision.actions[i].canonical not in avoid]
        return (fresh or order)[0]

    def to_json(self) -> dict[str, Any]:
        features = {kind: list(FEATURES[kind]) for kind in KINDS}
        weights = {kind: [float(x) for x in self.weights[kind]] for kind in KINDS}
        return {"format": WEIGHTS_FORMAT, **self.meta, "features": features, "weights": weights,
                "weights_sha256": _digest(features, weights)}

    def save(self, path: str | os.PathLike[str]) -> None:
        Path(path).write_text(json.dumps(self.to_json(), ensure_ascii=False, indent=1, sort_keys=True) + "\n")

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> LinearModel:
        """Weights from ``path``, checked: format, feature names (this code's), and their SHA-256."""
        try:
            payload = json.loads(Path(path).read_text())
        except (OSError, ValueError) as exc:
            raise PolicyError(f"cannot read learned-policy weights {path}: {exc}") from exc
        if not isinstance(payload, dict) or payload.get("format") != WEIGHTS_FORMAT:
            raise PolicyError(f"{path} is not a learned-policy weights file ({WEIGHTS_FORMAT})")
        features, weights = payload.get("features"), payload.get("weights")
        if not isinstance(weights, dict) or not all(isinstance(weights.get(kind), list) for kind in KINDS):
            raise PolicyError(f"{path} has no weight vector for every decision kind ({', '.join(KINDS)})")
        expected = {kind: list(FEATURES[kind]) for kind in KINDS}
        if features != expected:
            raise PolicyError(f"{path} was trained on other features than this version computes; retrain it "
                              "with `shopsimrl train policy`")
        if payload.get("weights_sha256") != _digest(features, weights):
            raise PolicyError(f"{path}: the weights do not match their SHA-256 (edited or damaged)")
        meta = {key: value for key, value in payload.items()
                if key not in ("format", "features", "weights", "weights_sha256")}
        return cls({kind: np.asarray(weights[kind], dtype=np.float64) for kind in KINDS}, meta)

    def check_catalog(self, world: ShopWorld, source: str) -> None:
        """Refuse weights trained on another catalog (the features mean other things there)."""
        trained = self.meta.get("catalog", {})
        here = catalog_stamp(world)
        if {key: trained.get(key) for key in here} != here:
            version = trained.get("generator_version", "an unknown catalog")
            raise PolicyError(
                f"the learned policy's weights ({source}) were trained on another catalog ({version}, data "
                f"{str(trained.get('output_data_sha256'))[:12]}…); this catalog's data is "
                f"{str(here['output_data_sha256'])[:12]}…. Train weights for it with `shopsimrl train policy "
                f"--data DIR --out FILE` and set ${WEIGHTS_ENV}=FILE"
            )


def taken_here(context: PolicyContext) -> frozenset[str]:
    """The actions already taken on this very page (the same page text) earlier in the episode."""
    history = context.history
    return frozenset(turn.action for before, turn in itertools.pairwise(history)
                     if before.observation == context.observation)


def fallback(context: PolicyContext) -> PolicyAction:
    """A page with nothing to decide (no candidates): back to search if offered, else the first click."""
    clicks = context.click_values()
    if not clicks:
        raise PolicyError(f"the learned policy has no action on this page ({parse_page(context.observation).kind})")
    return PolicyAction.click(BACK if BACK in clicks else clicks[0], "learned: recover")


class LearnedPolicy:
    """The built-in ``learned`` policy: greedy over the shipped (or ``$SHOPSIMRL_LEARNED_WEIGHTS``) weights."""

    name = "learned"

    def __init__(self, world: ShopWorld | None = None, model: LinearModel | None = None) -> None:
        if model is None:
            source = os.environ.get(WEIGHTS_ENV) or str(SHIPPED_WEIGHTS)
            model = LinearModel.load(source)
            if world is not None:
                model.check_catalog(world, source)
        self.model = model
        self.weights_sha256 = model.to_json()["weights_sha256"]

    def act(self, context: PolicyContext) -> PolicyAction:
        decision = decide(context)
        if decision is None:
            return fallback(context)
        return decision.actions[self.model.best(decision, avoid=taken_here(context))]


__all__ = ["SHIPPED_WEIGHTS", "WEIGHTS_ENV", "LearnedPolicy", "LinearModel", "catalog_stamp", "fallback", "zero_weights"]
