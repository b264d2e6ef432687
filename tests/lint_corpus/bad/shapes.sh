#!/bin/bash
export CUDA_DEVICE_MAX_CONNECTIONS=1
torchrun --nnodes 1 --nproc_per_node 8 pretrain_gpt.py \
  --tensor-model-parallel-size 8 \
  --num-layers 24 --hidden-size 12800 --num-attention-heads 100 --seq-length 2048 \
  --max-position-embeddings 2048 --micro-batch-size 1 --global-batch-size 8 --train-iters 10
