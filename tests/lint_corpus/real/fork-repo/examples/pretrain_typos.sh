#!/bin/bash
# Two mistakes the fork's own parser refuses at start-up.
export CUDA_DEVICE_MAX_CONNECTIONS=1
torchrun --nnodes 1 --nproc_per_node 8 pretrain_gpt.py \
    --tensor-model-parallel-size 2 --pipeline-model-parallel-size 1 \
    --num-layers 24 --hidden-size 2048 --num-attention-heads 16 \
    --seq-length 2048 --max-position-embeddings 2048 \
    --micro-batch-size 2 --global-batch-size 64 --train-iters 1000 --lr 3e-4 \
    --data-path /data/corpus_text_document --data-impl mmapp \
    --log-batch-size-to-tensorbord
