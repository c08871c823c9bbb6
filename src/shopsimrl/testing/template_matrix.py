"""The template-coverage matrix: every chat template in a folder, in both rollout modes, run through one oracle
episode and classified ``rewarded`` (the episode earns a reward), ``loud`` (refused before the first episode,
the adapter's call raises, or the episode aborts with its error in metadata) or ``silent`` (completed with
reward 0: what the tool-call probe exists to prevent).

It runs in any environment with the project and transformers installed (the main venv and the ``[verl]`` venv,
which has no TRL), so the two can be compared outcome by outcome; the template files come from a folder (TRL's
``chat_templates``), not from an import. ``python -m shopsimrl.testing.template_matrix --templates DIR
--catalog FILE`` prints the counts and, with ``--json``, every outcome.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import gzip
import json
import sys
import tempfile
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REWARDED, LOUD, SILENT = "rewarded", "loud", "silent"
MODES = ("append", "resegment")


def template_files(folder: Path, *, training: bool = False) -> list[Path]:
    """The model templates in ``folder`` (sorted); ``training=True`` adds the ``*_training`` variants."""
    return sorted(p for p in folder.glob("*.jinja") if training or not p.stem.endswith("_training"))


def base_tokenizer(data_dir: Path, chat_template: str) -> Any:
    """The matrix's byte-level BPE, trained once on the prepared catalog's products and the system prompt."""
    from ..agent.prompt import SYSTEM_PROMPT
    from ..train.bpe_tokenizer import build_bpe_tokenizer

    products = json.loads(gzip.decompress((data_dir / "products.json.gz").read_bytes()))
    corpus = [SYSTEM_PROMPT, *(json.dumps(p, ensure_ascii=False) for p in products)]
    return build_bpe_tokenizer(corpus, vocab_size=2000, chat_template=chat_template)


def run_case(world: Any, base: Any, template: Path, mode: str) -> tuple[str, str]:
    """(outcome, detail) of one oracle episode with ``template`` swapped into a copy of ``base``."""
    from ..agent import InProcessEnvironment
    from ..agent.policies import make_policy
    from ..errors import RolloutError
    from ..train.rollout import ABORTED, RolloutConfig, RolloutContext, run_rollout
    from ..train.template_probe import check_template
    from .scripted import TemplatePolicyGenerate

    tokenizer = copy.deepcopy(base)
    tokenizer.chat_template = template.read_text(encoding="utf-8")
    try:
        check_template(tokenizer)
    except RolloutError as exc:
        if exc.code != "template_unreadable":
            raise
        return LOUD, str(exc)
    generate = TemplatePolicyGenerate(tokenizer, make_policy("oracle", world))
    try:
        trajectory = asyncio.run(run_rollout(RolloutContext(0), tokenizer, generate, InProcessEnvironment(world),
                                             config=RolloutConfig(mode=mode, max_steps=12)))
    except Exception as exc:
        return LOUD, f"{type(exc).__name__}: {exc}"
    if trajectory.status == ABORTED:
        message = (trajectory.error or {}).get("message")
        return (LOUD, str(message)) if message else (SILENT, "aborted without an error message")
    if trajectory.reward > 0:
        return REWARDED, f"reward {trajectory.reward}"
    return SILENT, f"reward {trajectory.reward}: {trajectory.steps[:2]}"


def run_matrix(templates: Sequence[Path], data_dir: Path) -> dict[str, tuple[str, str]]:
    """``"<stem>/<mode>"`` → (outcome, detail) for every template in both modes."""
    from ..env import ShopWorld

    world = ShopWorld.from_data_dir(data_dir)
    base = base_tokenizer(data_dir, templates[0].read_text(encoding="utf-8"))
    return {f"{t.stem}/{mode}": run_case(world, base, t, mode) for t in templates for mode in MODES}


def counts(outcomes: dict[str, tuple[str, str]]) -> dict[str, int]:
    tally = Counter(outcome for outcome, _ in outcomes.values())
    return {key: tally.get(key, 0) for key in (REWARDED, LOUD, SILENT)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--templates", type=Path, required=True, help="folder of .jinja chat templates")
    parser.add_argument("--catalog", type=Path, help="catalog archive to prepare (the test fixture catalog)")
    parser.add_argument("--data", type=Path, help="an already prepared data directory instead of --catalog")
    parser.add_argument("--training", action="store_true", help="also run the *_training variants")
    parser.add_argument("--json", type=Path, help="write every outcome here")
    args = parser.parse_args(argv)
    files = template_files(args.templates, training=args.training)
    if not files:
        parser.error(f"no .jinja templates in {args.templates}")
    with tempfile.TemporaryDirectory() as tmp:
        data = args.data
        if data is None:
            if args.catalog is None:
                parser.error("give --catalog or --data")
            from ..catalog import PrepareOptions, prepare_dataset

            data = Path(tmp) / "prepared"
            prepare_dataset(args.catalog, data, options=PrepareOptions(test_size=2, val_size=2))
        outcomes = run_matrix(files, data)
    if args.json is not None:
        args.json.write_text(json.dumps({k: list(v) for k, v in outcomes.items()}, indent=1, sort_keys=True) + "\n",
                             encoding="utf-8")
    tally = counts(outcomes)
    print(f"{len(outcomes)} runs: {tally[REWARDED]} rewarded / {tally[LOUD]} loud / {tally[SILENT]} silent")
    print("rewarded:", " ".join(key for key, (outcome, _) in outcomes.items() if outcome == REWARDED))
    for key, (outcome, detail) in outcomes.items():
        if outcome == SILENT:
            print(f"silent: {key}: {detail}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
