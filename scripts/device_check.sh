#!/usr/bin/env bash
# The GPU preset's device check (issue 46): one shortened `shopsimrl train cpu-demo --preset gpu` run, sized for
# 10 minutes of accelerator time, then the figures it prints (stage wall times, batch sizes, sampled tokens/s,
# the evaluation table). Run it by hand on a machine with a CUDA GPU, never in tests or CI:
#
#   scripts/device_check.sh                      # DATA=data/default OUT=/tmp/device-check
#
# DEVICE_CHECK_TINY=1 runs the same code path (batched decoding, the gpu preset's stage code) on the CPU with
# the smoke preset's tiny model and a handful of steps: what tests/test_train_cpu_demo.py checks.
set -euo pipefail
PYTHON=${PYTHON:-python}
DATA=${DATA:-data/default}
OUT=${OUT:-${TMPDIR:-/tmp}/device-check}
rm -rf "$OUT"

"$PYTHON" - <<'EOF'
import torch
cuda = torch.cuda.is_available()
print(f"[device-check] torch {torch.__version__}, CUDA {cuda}"
      + (f", {torch.cuda.get_device_name(0)}, bf16 {torch.cuda.is_bf16_supported()}" if cuda else ""))
EOF

if [[ ! -f "$DATA/manifest.json" ]]; then  # a bare machine: build the default catalog first (no download)
  start=$(date +%s)
  "$PYTHON" -m shopsimrl.cli data build-default --out "$DATA"
  echo "[device-check] catalog built in $(( $(date +%s) - start )) s"
fi

if [[ "${DEVICE_CHECK_TINY:-0}" == 1 ]]; then
  # the gpu preset's sampler on CPU: the smoke model, batched decoding, a few steps, 4 val tasks
  args=(--preset smoke --batched-decoding --grpo-concurrency 4 --eval-concurrency 4 --threads 1
        --sft-short-steps 1 --sft-first-steps 1 --sft-lm-steps 1 --sft-steps 1 --grpo-steps 1 --eval-tasks 2
        --demo-train-tasks 6 --demo-standard-tasks 2 --grpo-max-groups 2)
else
  # the gpu preset, shortened to fit 10 minutes: 100 steps per SFT phase, 5 GRPO steps, 64 val tasks
  args=(--preset gpu --sft-short-steps 100 --sft-first-steps 100 --sft-lm-steps 100 --sft-steps 100
        --grpo-steps 5 --eval-tasks 64 --demo-standard-tasks 200)
fi
start=$(date +%s)
"$PYTHON" -m shopsimrl.cli train cpu-demo --data "$DATA" --out "$OUT" "${args[@]}" "$@"
echo "[device-check] wall $(( $(date +%s) - start )) s"

OUT="$OUT" "$PYTHON" - <<'EOF'
import json, os
from pathlib import Path

out = Path(os.environ["OUT"])
results = json.loads((out / "results.json").read_text())
print("[device-check] stage wall s:", json.dumps({k: v for k, v in results["timings"].items()}))
grpo = results.get("grpo") or {}
print("[device-check] grpo:", json.dumps({k: grpo.get(k) for k in ("steps", "episodes", "train_s", "groups")}))
rows = [json.loads(line) for line in (out / "model" / "grpo" / "rollouts.jsonl").read_text().splitlines() if line]
for row in rows:
    print(f"[device-check] grpo step {row['step']}: rollout {row['rollout_s']} s, {row['episodes']} episodes, "
          f"{row['sampled_tokens_per_s']:.0f} sampled tokens/s, {row['decode_batch_mean']:.1f} turns per batch, groups sampled {row['groups_sampled_count']} "
          f"kept {row['groups_kept_count']}")
for name, row in (results.get("eval") or {}).get("checkpoints", {}).items():
    print(f"[device-check] eval {name:9s} success {row['success']:.4f} r_strict {row['r_strict']:.4f} "
          f"protocol errors {row['protocol_error_rate']:.4f} wall {row['wall_s']} s")
print(f"[device-check] peak RSS {results.get('peak_rss_mb')} MB")
EOF
