#!/bin/bash
# Megatron's sequence parallelism on microsoft's fork needs CUDA_DEVICE_MAX_CONNECTIONS=1
# (its validate_args asserts it with --sequence-parallel); this script never exports it.
cat <<EOT > ds_config.json
{"train_batch_size": 64, "train_micro_batch_size_per_gpu": 4,
 "zero_optimization": {"stage": 1}, "bf16": {"enabled": true}}
EOT
deepspeed --num_nodes 1 --num_gpus 8 pretrain_gpt.py \
  --tensor-model-parallel-size 4 --sequence-parallel --pipeline-model-parallel-size 1 \
  --num-layers 24 --hidden-size 4096 --num-attention-heads 32 --seq-length 4096 \
  --max-position-embeddings 4096 --micro-batch-size 4 --global-batch-size 64 \
  --train-iters 2000 --lr 1e-4 --bf16 --use-rotary-position-embeddings \
  --deepspeed --deepspeed_config ds_config.json --zero-stage 1
