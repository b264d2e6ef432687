#!/bin/bash
export CUDA_DEVICE_MAX_CONNECTIONS=1
deepspeed --num_nodes 1 --num_gpus 8 pretrain_gpt.py \
  --pipeline-model-parallel-size 2 \
  --num-layers 24 --hidden-size 1024 --num-attention-heads 16 --seq-length 2048 \
  --max-position-embeddings 2048 --micro-batch-size 1 --global-batch-size 16 --train-iters 10 \
  --deepspeed --deepspeed_config zero3.json --zero-stage 3
