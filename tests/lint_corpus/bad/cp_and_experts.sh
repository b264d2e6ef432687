#!/bin/bash
export CUDA_DEVICE_MAX_CONNECTIONS=1
torchrun --nnodes 1 --nproc_per_node 8 pretrain_gpt.py \
  --context-parallel-size 2 --expert-model-parallel-size 4 --num-experts 6 \
  --num-layers 24 --hidden-size 1024 --num-attention-heads 16 --seq-length 2050 \
  --max-position-embeddings 4096 --micro-batch-size 1 --global-batch-size 4 --train-iters 10
