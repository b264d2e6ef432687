#!/bin/bash
# Both branches of a run-time condition give a batch that does not divide: an error either way.
export CUDA_DEVICE_MAX_CONNECTIONS=1
if [ "$SLURM_NNODES" -gt 1 ]; then
  GBS=1001
else
  GBS=250
fi
torchrun --nnodes 1 --nproc-per-node 8 pretrain_gpt.py --tensor-model-parallel-size 1 \
  --num-layers 12 --hidden-size 768 --num-attention-heads 12 --seq-length 1024 \
  --max-position-embeddings 1024 --micro-batch-size 1 --global-batch-size $GBS --train-iters 100 \
  --lr 6e-4 --bf16
