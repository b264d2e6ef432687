#!/bin/bash
# The same chain with a size that reaches the else arm: 23 layers on 4 stages.
export CUDA_DEVICE_MAX_CONNECTIONS=1
SIZE=medium
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
