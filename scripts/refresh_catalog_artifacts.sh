#!/usr/bin/env bash
# After a generator version bump: rebuild the default catalog and regenerate every committed artifact bound to it,
# in dependency order, each step logged under $LOGS. The docs' figures are then updated by hand from the logs.
#
#   bash scripts/refresh_catalog_artifacts.sh [STEP ...]     (default: all steps, in this order)
#
# Steps: build, learned (3 seeds at once; seed 0's weights ship), ladder, ablation, scenarios, dialogue, hub.
# `learned` takes ~10 minutes on 2 cores, `ablation` ~15, the rest a few minutes each.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
DATA=${DATA:-data/default}
LOGS=${LOGS:-runs/refresh}
mkdir -p "$LOGS"
steps=("$@"); [ ${#steps[@]} -eq 0 ] && steps=(build learned ladder ablation scenarios dialogue hub)
log() { echo "[refresh $(date -u +%H:%M:%S)] $*"; }
for step in "${steps[@]}"; do
  log "$step …"
  case $step in
    build) $PY -m shopsimrl.cli data build-default --out "$DATA" --force > "$LOGS/build.log" 2>&1 ;;
    learned)
      pids=()
      for seed in 0 1 2; do
        $PY benchmarks/bench_learned.py "$DATA" --stages curves --seeds $seed > "$LOGS/curves-$seed.log" 2>&1 &
        pids+=($!)
      done
      for pid in "${pids[@]}"; do wait "$pid"; done
      $PY benchmarks/bench_learned.py "$DATA" --stages curves > "$LOGS/curves.log" 2>&1   # the plot, all seeds
      cp docs/learned_run/seed-0/weights.json src/shopsimrl/agent/policies/learned_weights.json ;;
    ladder) $PY benchmarks/bench_learned.py "$DATA" --stages ladder > "$LOGS/ladder.log" 2>&1 ;;
    ablation) $PY benchmarks/bench_learned.py "$DATA" --stages ablation --ablation-episodes 30000 \
                > "$LOGS/ablation.log" 2>&1 ;;
    scenarios) $PY benchmarks/bench_scenarios.py "$DATA" --policies heuristic,strong,oracle,learned --repeats 1 \
                 --out "$LOGS/scenarios" > "$LOGS/scenarios.log" 2>&1 ;;
    dialogue) $PY benchmarks/bench_dialogue.py "$DATA" > "$LOGS/dialogue.log" 2>&1 ;;
    hub)
      $PY scripts/openenv_manifest.py --data "$DATA" > "$LOGS/openenv_manifest.log" 2>&1
      $PY scripts/nemo_gym_examples.py --data "$DATA" > "$LOGS/nemo_gym.log" 2>&1
      if [ -x .venv-verifiers/bin/python ]; then
        .venv-verifiers/bin/python scripts/vf_example_outputs.py --data "$DATA" > "$LOGS/vf_outputs.log" 2>&1
      else
        log "no .venv-verifiers (built by the verifiers tests on first use): environments/shopsim_env/outputs skipped"
      fi ;;
    *) echo "unknown step $step" >&2; exit 2 ;;
  esac
  log "$step done"
done
