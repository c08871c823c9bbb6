#!/usr/bin/env bash
# GRPO on the shop with slime (checked against slime's source at commit 624b824, the v0.3.1 line): the
# reference-run settings of docs/training.md, Qwen3-4B-Instruct-2507 on one 8-GPU node.
#
#   shopsimrl serve --data data/default --port 5700 --slots 256 &
#   python examples/slime/build_tasks.py --data data/default --out shop_tasks
#   SLIME_DIR=/root/slime HF_CKPT=/root/Qwen3-4B-Instruct-2507 REF_LOAD=/root/Qwen3-4B-Instruct-2507_torch_dist \
#     bash examples/slime/run_grpo.sh
#
# 80 rollout steps (--num-rollout 80: the reference run), a checkpoint every SAVE_INTERVAL steps (20) in SAVE; a rerun
# of the same command resumes from the last one there (--load SAVE: slime/Megatron load the latest iteration of
# --load when it holds one, else start from --ref-load); RESUME=0 starts over (no --load).
#
# Needs slime's container (Megatron-LM, SGLang) and a Ray head (`ray start --head`). DRY_RUN=1 prints the
# command, one argument per line, instead of running it (the CI test reads it).
set -euo pipefail
HERE="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)"
SLIME_DIR="${SLIME_DIR:-/root/slime}"
HF_CKPT="${HF_CKPT:-/root/Qwen3-4B-Instruct-2507}"
REF_LOAD="${REF_LOAD:-/root/Qwen3-4B-Instruct-2507_torch_dist}"
SAVE="${SAVE:-/root/shopsim_slime}"
TASKS="${TASKS:-shop_tasks}"
N_GPUS="${N_GPUS:-8}"
SAVE_INTERVAL="${SAVE_INTERVAL:-20}"
RESUME="${RESUME:-1}"
LOAD_ARGS=()
if [[ "${RESUME}" == "1" ]]; then
  LOAD_ARGS=(--load "${SAVE}")
fi
MODEL_ARGS=()
if [[ -f "${SLIME_DIR}/scripts/models/qwen3-4B-Instruct-2507.sh" ]]; then
  source "${SLIME_DIR}/scripts/models/qwen3-4B-Instruct-2507.sh"   # defines MODEL_ARGS (Megatron architecture)
fi

ARGS=(
  "${MODEL_ARGS[@]}"
  --hf-checkpoint "${HF_CKPT}" --ref-load "${REF_LOAD}" "${LOAD_ARGS[@]}" --save "${SAVE}" --save-interval "${SAVE_INTERVAL}"
  --actor-num-nodes 1 --actor-num-gpus-per-node "${N_GPUS}" --colocate
  --prompt-data "${TASKS}/train.jsonl" --input-key prompt --metadata-key metadata --rollout-shuffle
  --eval-prompt-data shop_val "${TASKS}/val.jsonl" --eval-interval 20 --n-samples-per-eval-prompt 1
  --custom-config-path "${HERE}/shopsim.yaml"
  --custom-generate-function-path shopsimrl.train.slime.generate
  --dynamic-sampling-filter-path shopsimrl.train.slime.fully_scored_group_filter
  --custom-reward-post-process-path shopsimrl.train.slime.normalize_grpo_by_prompt_and_rollout
  # the batch's protocol-error rate and alarm in every rollout step's metrics (shop/protocol_error_rate, ..._alarm)
  --custom-rollout-log-function-path shopsimrl.train.slime.log_rollout_health
  --reward-key reward --advantage-estimator grpo
  --n-samples-per-prompt 8 --over-sampling-batch-size 32 --rollout-batch-size 16 --global-batch-size 64
  --num-rollout 80
  --rollout-temperature 0.6 --rollout-top-p 1.0 --rollout-top-k -1
  --rollout-max-response-len 4096 --rollout-max-context-len 24576
  --optimizer adam --lr 1e-6 --lr-decay-style constant --adam-beta1 0.9 --adam-beta2 0.98 --weight-decay 0.1
  --eps-clip 0.2 --eps-clip-high 0.28 --entropy-coef 0.0
  --tensor-model-parallel-size 2 --sequence-parallel --use-dynamic-batch-size --max-tokens-per-gpu 24576
  --recompute-granularity full --recompute-method uniform --recompute-num-layers 1
  --rollout-num-gpus-per-engine 2 --sglang-mem-fraction-static 0.6
  --attention-dropout 0.0 --hidden-dropout 0.0 --accumulate-allreduce-grads-in-fp32 --attention-softmax-in-fp32
)

if [[ "${DRY_RUN:-0}" == "1" ]]; then
  printf '%s\n' python3 "${SLIME_DIR}/train.py" "${ARGS[@]}"
  exit 0
fi
exec python3 "${SLIME_DIR}/train.py" "${ARGS[@]}"
