"""Can the CPU recipe's model learn to copy the request into its first search query? (issue 24 probe)

Trains a fresh model (random init, the recipe's tokenizer) on the first call of each demonstrated episode only,
for a fixed wall time, then decodes the first query greedily for the tasks of an eval run and counts how many
share at least two character bigrams with the request. ``--rows first`` trains on the full first-turn prompt
(rules, persona, tool schemas, request: ~1,300 tokens); ``--rows short`` on the request alone (~130 tokens).
``--decode`` picks which prompt the query is decoded after. Figures: docs/training.md ("Train a small policy
on CPU", generator v7.1 paragraph).

    python benchmarks/bench_cpu_copy.py --run runs/learn71 \\
        --tasks runs/learn71/evalx/sft-40-0.6-required/traces.jsonl --rows short --decode full --minutes 6
"""

from __future__ import annotations

import argparse
import json
import random
import time
from dataclasses import replace
from pathlib import Path
from typing import Any


def _bigrams(text: str) -> set[str]:
    return {text[i: i + 2] for i in range(len(text) - 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", required=True, help="a cpu-demo output directory with model/init and demos/")
    parser.add_argument("--tasks", required=True, help="traces.jsonl of an eval run: the tasks to decode for")
    parser.add_argument("--data", default="data/default", help="the prepared data directory")
    parser.add_argument("--rows", default="first",
                        help="training rows, phases in order: short (request only), first (full first-turn prompt), mixed "
                             "(whole episodes and first-turn prefixes), e.g. short,first (a curriculum)")
    parser.add_argument("--decode", choices=["full", "short"], default="full", help="prompt decoded after")
    parser.add_argument("--save", help="write the trained checkpoint here")
    parser.add_argument("--layers", type=int, default=2, help="decoder layers (hidden 128 as the cpu preset)")
    parser.add_argument("--minutes", default="10", help="training wall time per phase (comma-separated)")
    args = parser.parse_args()

    import torch
    from transformers import AutoTokenizer

    from shopsimrl.train import cpu_demo
    from shopsimrl.train.chat_template import episode_tools
    from shopsimrl.train.checkpoint_server import template_messages
    from shopsimrl.train.cpu_demo_sft import (
        COPY_BATCH,
        copy_rows,
        first_turn_rows,
        sft_phase,
        sft_rows,
        sft_tokens,
    )
    from shopsimrl.train.local_lm import (
        PRESETS,
        TEMPLATE_FILE,
        TRAINING_TEMPLATE_FILE,
        build_model,
        chat_template,
    )

    torch.set_num_threads(2)
    run = Path(args.run)
    tok: Any = AutoTokenizer.from_pretrained(run / "model" / "init")
    model = build_model(tok, replace(PRESETS["cpu"], layers=args.layers), seed=0)
    records = [json.loads(line) for line in (run / "demos" / "sft_turns.jsonl").read_text().splitlines() if line]
    rows = sft_rows(records)
    random.Random(0).shuffle(rows)
    tok.chat_template = chat_template(TRAINING_TEMPLATE_FILE)
    phases = [phase.strip() for phase in args.rows.split(",")]
    minutes = [float(m) for m in args.minutes.split(",")]
    if set(phases) - {"first", "short", "mixed"} or len(minutes) != len(phases):
        parser.error("--rows takes first/short/mixed phases and --minutes one figure per phase")
    whole = sft_tokens(rows, tok) if {"first", "mixed"} & set(phases) else []
    data = {  # the recipe's copy-curriculum rows, and whole episodes mixed half and half with first-turn prefixes
        "short": lambda: copy_rows(rows, whole, "short", tok),
        "first": lambda: copy_rows(rows, whole, "first", tok),
        "mixed": lambda: first_turn_rows(whole, 0.5, 0)}
    wall, steps, train = 0.0, [], []
    for phase, budget in zip(phases, minutes, strict=True):
        train = data[phase]()
        cfg = cpu_demo.RecipeConfig(data=args.data, out="/tmp/bench_cpu_copy", sft_lr=3e-3, sft_minutes=budget,
                                    sft_batch={**COPY_BATCH, "mixed": 1}[phase])
        start = time.perf_counter()
        trainer = sft_phase(cfg, model, tok, train, steps=10**6, name=f"copy-{phase}",
                            scheduler="constant_with_warmup", output_dir=Path(cfg.out))
        wall += time.perf_counter() - start
        model = trainer.model
        steps.append(trainer.state.global_step)
    tok.chat_template = chat_template(TEMPLATE_FILE)
    if args.save:  # a checkpoint the recipe's eval stage can serve (runs/…/model/<name>)
        model.save_pretrained(args.save)
        tok.save_pretrained(args.save)
    model = model.eval()
    traces = [json.loads(line) for line in Path(args.tasks).read_text().splitlines() if line]
    sharing = found = total = 0
    for trace in traces:
        messages = template_messages(trace["conversation"][:2])
        if args.decode == "short":
            text = tok.apply_chat_template([{"role": "system", "content": "s"}, messages[1]], tokenize=False,
                                           add_generation_prompt=True)
        else:
            text = tok.apply_chat_template(messages, tools=episode_tools(), tokenize=False, add_generation_prompt=True)
        ids = tok(text + '<tool_call>\n{"name": "search", "arguments": {"query": "', return_tensors="pt").input_ids
        with torch.no_grad():
            out = model.generate(ids, max_new_tokens=40, do_sample=False)
        query = tok.decode(out[0, ids.shape[1]:]).split('"')[0]
        request = _bigrams(trace["reset"]["task_instruction"])
        got = _bigrams(query)
        total, found, sharing = total + len(got), found + len(got & request), sharing + (len(got & request) >= 2)
    print(json.dumps({"rows": args.rows, "decode": args.decode, "layers": args.layers,
                      "train_rows": len(train), "steps": steps, "train_s": round(wall),
                      "tasks": len(traces), "queries_sharing_2_bigrams": sharing,
                      "query_bigrams_in_request": [found, total]}))


if __name__ == "__main__":
    main()
