#!/bin/bash
# Context parallelism over 4 ranks: each rank holds two chunks of seq / (2 x cp) tokens, and
# 32772 tokens do not split so.
export CUDA_DEVICE_MAX_CONNECTIONS=1
ARGS=(
  --tensor-model-parallel-size 2 --context-parallel-size 4 --sequence-parallel
  --num-layers 32 --hidden-size 4096 --num-attention-heads 32 --group-query-attention
  --num-query-groups 8 --seq-length 32772 --max-position-embeddings 32772
  --micro-batch-size 1 --global-batch-size 8 --train-iters 1000 --lr 1e-5 --bf16
  --position-embedding-type rope --mock-data --tokenizer-type NullTokenizer --vocab-size 128256
)
torchrun --nnodes 1 --nproc-per-node 8 pretrain_gpt.py "${ARGS[@]}"
