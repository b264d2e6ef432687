#!/bin/bash
export CUDA_DEVICE_MAX_CONNECTIONS=1
torchrun --nnodes 1 --nproc_per_node 8 pretrain_gpt.py \
  --tensor-model-parallel-size 2 --num-layers 24 --hidden-size 2048 --num-attention-heads 16 \
  --seq-length 4096 --max-position-embeddings 4096 --micro-batch-size 1 --global-batch-size 64 \
  --position-embedding-type rotary --attention-backend flash --train-iters 100 --lr 3e-4
