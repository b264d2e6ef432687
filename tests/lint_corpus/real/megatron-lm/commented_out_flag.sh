#!/bin/bash
# A flag commented out in the middle of a continued command: bash ends the command at the
# comment, so --bf16 and the lines after it never reach pretrain_gpt.py.
export CUDA_DEVICE_MAX_CONNECTIONS=1
torchrun --nnodes 1 --nproc-per-node 8 pretrain_gpt.py \
    --tensor-model-parallel-size 2 \
    --num-layers 24 --hidden-size 2048 --num-attention-heads 16 \
    --seq-length 2048 --max-position-embeddings 2048 \
    --micro-batch-size 4 --global-batch-size 64 \
    # --use-flash-attn \
    --bf16 \
    --train-iters 1000 --lr 2e-4
