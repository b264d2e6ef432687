#!/bin/bash
# Megatron-LM with flags from another era, and no CUDA_DEVICE_MAX_CONNECTIONS.
ARGS=(
  --tensor-model-parallel-size 2
  --num-layers 24 --hidden-size 1024 --num-attention-heads 16
  --num-query-groups 4
  --seq-length 2048 --max-position-embeddings 2048
  --micro-batch-size 1 --global-batch-size 32
  --checkpoint-activations
  --train-iters 1000 --lr-decay-samples 30000
)
torchrun --nnodes 1 --nproc_per_node 8 pretrain_gpt.py "${ARGS[@]}"
