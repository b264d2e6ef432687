#!/bin/bash
# Packed pre-training data, but only the positions restart at each document: attention still
# crosses document boundaries (the seed article's warning), and FP8 on Megatron-DeepSpeed.
torchrun --nnodes 1 --nproc_per_node 8 pretrain_gpt.py \
  --num-layers 24 --hidden-size 1024 --num-attention-heads 16 --seq-length 2048 \
  --max-position-embeddings 2048 --micro-batch-size 1 --global-batch-size 8 --train-iters 10 \
  --reset-position-ids --eod-mask-loss \
  --deepspeed --zero-stage 1 --bf16 --fp8-format hybrid
