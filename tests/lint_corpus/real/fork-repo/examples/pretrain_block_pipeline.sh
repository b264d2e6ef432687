#!/bin/bash
# 30 layers over 4 stages, split 7,7,8,8 by the fork's block method; --data-impl and
# --use-flash-attn are the fork's own (its model code reads the switch).
export CUDA_DEVICE_MAX_CONNECTIONS=1
torchrun --nnodes 1 --nproc_per_node 8 pretrain_gpt.py \
    --tensor-model-parallel-size 2 --pipeline-model-parallel-size 4 \
    --pipeline-model-parallel-method block --pipeline-model-parallel-blocks 7,7,8,8 \
    --num-layers 30 --hidden-size 2048 --num-attention-heads 16 \
    --seq-length 2048 --max-position-embeddings 2048 \
    --micro-batch-size 1 --global-batch-size 32 --train-iters 1000 --lr 3e-4 \
    --position-embedding-type rope --use-flash-attn --bf16 \
    --data-path /data/corpus_text_document --data-impl mmap --valid-num-workers 4 \
    --log-batch-size-to-tensorboard --eval-tasks lambada piqa
