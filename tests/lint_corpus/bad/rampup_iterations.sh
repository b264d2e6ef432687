#!/bin/bash
torchrun --nnodes 1 --nproc_per_node 8 pretrain_gpt.py \
  --num-layers 24 --hidden-size 1024 --num-attention-heads 16 --seq-length 2048 \
  --max-position-embeddings 2048 --micro-batch-size 2 --global-batch-size 512 \
  --rampup-batch-size 32 32 1000000 --train-iters 50000
