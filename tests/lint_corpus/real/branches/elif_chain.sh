#!/bin/bash
# An if/elif/else chain decided by a value set in the script: small is 12 layers, which divide
# over 4 pipeline stages (the else arm's 23 would not).
export CUDA_DEVICE_MAX_CONNECTIONS=1
SIZE=small
if [ "$SIZE" = tiny ]; then
  LAYERS=2
elif [ "$SIZE" = small ]; then
  LAYERS=12
else
  LAYERS=23
fi
torchrun --nnodes 1 --nproc-per-node 8 pretrain_gpt.py --pipeline-model-parallel-size 4 \
  --tensor-model-parallel-size 2 --num-layers $LAYERS --hidden-size 768 --num-attention-heads 12 \
  --seq-length 1024 --max-position-embeddings 1024 --micro-batch-size 4 --global-batch-size 32 \
  --train-iters 100 --lr 6e-4 --bf16
