#!/usr/bin/env bash
# GRPO on the shop with verl 0.9.1 (the reference-run settings of docs/training.md), one node.
#
#   shopsimrl serve --data data/default --port 5700 --slots 256 &        # the environment (or SHOPSIM_DATA)
#   python examples/verl/build_tasks.py --data data/default --out shop_tasks
#   MODEL_PATH=Qwen/Qwen3-4B-Instruct-2507 N_GPUS=8 bash examples/verl/run_grpo.sh
#
# 80 training steps (the reference run; 16 tasks x 8 rollouts a step), a checkpoint every SAVE_FREQ steps (20) in
# CKPT_DIR; a rerun of the same command resumes from the last one (verl's trainer.resume_mode=auto); RESUME=disable
# starts over. Extra arguments are passed on to verl (Hydra overrides), e.g. trainer.logger=[console,wandb].
#
# DRY_RUN=1 prints the command, one argument per line, instead of running it (the CI test reads it).
set -euo pipefail
HERE="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)"
MODEL_PATH="${MODEL_PATH:-Qwen/Qwen3-4B-Instruct-2507}"
TASKS="${TASKS:-shop_tasks}"
N_GPUS="${N_GPUS:-8}"
SAVE_FREQ="${SAVE_FREQ:-20}"
CKPT_DIR="${CKPT_DIR:-checkpoints/shopsimrl/grpo-verl}"
RESUME="${RESUME:-auto}"
export SHOPSIM_ENV_URL="${SHOPSIM_ENV_URL:-http://127.0.0.1:5700}"

ARGS=(
  # verl 0.9.1 defaults to trainer.use_v1=true (TaskRunnerV1), whose run imports transfer_queue, which verl does
  # not install (ModuleNotFoundError before any GPU work); the legacy trainer (main_ppo_v0.TaskRunner with
  # RayPPOTrainer) is the one this agent loop, its estimator and its metrics manager are tested through
  trainer.use_v1=false
  # GRPO with the unscored-sibling rule (shopsimrl.train.groups): verl's own estimator registry, filled in every
  # Ray process (the driver computes advantages) by Ray's worker_process_setup_hook
  algorithm.adv_estimator=shopsim_grpo
  +ray_kwargs.ray_init.runtime_env.worker_process_setup_hook=shopsimrl.train.verl_grpo.register
  algorithm.use_kl_in_reward=false
  algorithm.norm_adv_by_std_in_grpo=true
  data.train_files="${TASKS}/train.parquet"
  data.val_files="${TASKS}/val.parquet"
  data.train_batch_size=16
  data.max_prompt_length=8192
  data.max_response_length=16384
  data.filter_overlong_prompts=false
  data.return_raw_chat=true
  actor_rollout_ref.model.path="${MODEL_PATH}"
  actor_rollout_ref.actor.optim.lr=1e-6
  actor_rollout_ref.actor.optim.weight_decay=0.1
  actor_rollout_ref.actor.optim.betas=[0.9,0.98]
  actor_rollout_ref.actor.ppo_mini_batch_size=8
  actor_rollout_ref.actor.clip_ratio_low=0.2
  actor_rollout_ref.actor.clip_ratio_high=0.28
  actor_rollout_ref.actor.use_kl_loss=false
  actor_rollout_ref.actor.entropy_coeff=0
  actor_rollout_ref.actor.use_dynamic_bsz=true
  # >= prompt_length + response_length: verl's rearrange_micro_batches asserts every (padded) row fits; the
  # reference and rollout log-prob budgets follow this value
  actor_rollout_ref.actor.ppo_max_token_len_per_gpu=24576
  actor_rollout_ref.rollout.name=vllm
  actor_rollout_ref.rollout.mode=async
  actor_rollout_ref.rollout.n=8
  actor_rollout_ref.rollout.temperature=0.6
  actor_rollout_ref.rollout.top_p=1.0
  actor_rollout_ref.rollout.top_k=-1
  actor_rollout_ref.rollout.calculate_log_probs=true
  actor_rollout_ref.rollout.prompt_length=8192
  actor_rollout_ref.rollout.response_length=16384
  actor_rollout_ref.rollout.gpu_memory_utilization=0.6
  actor_rollout_ref.rollout.agent.agent_loop_config_path="${HERE}/agent_loop.yaml"
  actor_rollout_ref.rollout.agent.default_agent_loop=shopsim
  # verl's manager plus the batch's protocol-error rate and alarm in every training step's metrics
  # (timing_s/shop/protocol_error_rate, timing_s/shop/protocol_error_alarm)
  +actor_rollout_ref.rollout.agent.agent_loop_manager_class=shopsimrl.train.verl_manager.ShopAgentLoopManager
  trainer.n_gpus_per_node="${N_GPUS}"
  trainer.nnodes=1
  trainer.total_epochs=1
  trainer.total_training_steps=80
  trainer.save_freq="${SAVE_FREQ}"
  trainer.resume_mode="${RESUME}"
  trainer.default_local_dir="${CKPT_DIR}"
  trainer.test_freq=20
  trainer.logger=[console]
  trainer.project_name=shopsimrl
  trainer.experiment_name=grpo-verl
)

if [[ "${DRY_RUN:-0}" == "1" ]]; then
  printf '%s\n' python3 -m verl.trainer.main_ppo "${ARGS[@]}" "$@"
  exit 0
fi
exec python3 -m verl.trainer.main_ppo "${ARGS[@]}" "$@"
