#!/bin/bash
torchrun --nnodes 2 --nproc_per_node 8 pretrain_gpt.py \
  --pipeline-model-parallel-size 16 \
  --num-layers 95 --hidden-size 1024 --num-attention-heads 16 --seq-length 2048 \
  --max-position-embeddings 2048 --micro-batch-size 1 --global-batch-size 16 --train-iters 10
