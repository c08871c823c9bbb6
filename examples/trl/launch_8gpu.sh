#!/usr/bin/env bash
# GRPO with TRL on one 8-GPU node: a vLLM server with TRL's weight-sync endpoints on GPUs 0-3 (data parallel 4),
# training with `accelerate launch` (DeepSpeed ZeRO-3, accelerate_zero3.yaml) on GPUs 4-7.
#
#   shopsimrl serve --data data/default --port 5700 --slots 256 &     # optional: else the in-process shop
#   MODEL=Qwen/Qwen3-4B-Instruct-2507 DATA=data/default bash examples/trl/launch_8gpu.sh
#
# Batch: 128 completions per generation (16 tasks x 8), optimizer steps of 64 (16 per GPU x 4 GPUs), so 160
# optimizer steps = the reference's 80 rollout steps; a checkpoint every 40 optimizer steps (20 rollout steps) in
# OUT; RESUME=1 continues from the last one. Extra arguments go to train_grpo.py.
# DRY_RUN=1 prints the two commands (server, then trainer), one per line, instead of running them (CI parses them).
set -euo pipefail
HERE="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)"
MODEL="${MODEL:-Qwen/Qwen3-4B-Instruct-2507}"
DATA="${DATA:-data/default}"
OUT="${OUT:-out/trl-grpo}"
PORT="${PORT:-8000}"
SERVER_GPUS="${SERVER_GPUS:-0,1,2,3}"
TRAIN_GPUS="${TRAIN_GPUS:-4,5,6,7}"
RESUME="${RESUME:-0}"
n_of() { local IFS=,; set -- $1; echo $#; }

SERVE=(trl vllm-serve --model "${MODEL}" --port "${PORT}" --data-parallel-size "$(n_of "${SERVER_GPUS}")"
       --max-model-len 24576 --enable-prefix-caching true)
TRAIN=(accelerate launch --config_file "${HERE}/accelerate_zero3.yaml" --num_processes "$(n_of "${TRAIN_GPUS}")"
       "${HERE}/train_grpo.py" --model "${MODEL}" --data "${DATA}" --vllm-server "http://127.0.0.1:${PORT}"
       --output-dir "${OUT}" --per-device-batch 16 --grad-accum 1 --generation-batch-size 128
       --max-steps 160 --save-steps 40)
if [[ "${RESUME}" == "1" ]]; then
  TRAIN+=(--resume)
fi
TRAIN+=("$@")

if [[ "${DRY_RUN:-0}" == "1" ]]; then
  echo "CUDA_VISIBLE_DEVICES=${SERVER_GPUS} ${SERVE[*]}"
  echo "CUDA_VISIBLE_DEVICES=${TRAIN_GPUS} ${TRAIN[*]}"
  exit 0
fi
CUDA_VISIBLE_DEVICES="${SERVER_GPUS}" "${SERVE[@]}" &
SERVER=$!
trap 'kill "${SERVER}" 2>/dev/null || true' EXIT
until curl -sf "http://127.0.0.1:${PORT}/health" > /dev/null; do   # vLLM's health endpoint
  kill -0 "${SERVER}" 2>/dev/null || { echo "the vLLM server exited" >&2; exit 1; }
  sleep 5
done
CUDA_VISIBLE_DEVICES="${TRAIN_GPUS}" "${TRAIN[@]}"
