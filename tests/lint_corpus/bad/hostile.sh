#!/bin/bash
# Nothing here may run: the linter only reads.
OUT=$(touch pwned-by-substitution)
eval "touch pwned-by-eval"
`touch pwned-by-backticks`
A=$B; B=$A
X="${X:-$(touch pwned-default)}"
torchrun --nnodes 1 --nproc_per_node 8 pretrain_gpt.py --micro-batch-size 1 \
  --global-batch-size 12 --num-layers 24 --seq-length 2048 --train-iters 10 \
  --max-position-embeddings 2048 --hidden-size 1024 --num-attention-heads 16
