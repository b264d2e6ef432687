#!/bin/bash
torchrun --nnodes 1 --nproc_per_node 8 pretrain_gpt.py \
  --tensor-model-parallel-size 1 --sequence-parallel \
  --num-layers 24 --hidden-size 1024 --num-attention-heads 16 --seq-length 2048 \
  --max-position-embeddings 2048 --micro-batch-size 1 --global-batch-size 8 --train-iters 10
