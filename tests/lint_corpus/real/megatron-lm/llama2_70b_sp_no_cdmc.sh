#!/bin/bash
# tp 8 with sequence parallelism and no CUDA_DEVICE_MAX_CONNECTIONS=1: Megatron-LM asks for it
# to overlap tensor-parallel communication (before Blackwell).
torchrun --nnodes 1 --nproc-per-node 8 pretrain_gpt.py \
  --tensor-model-parallel-size 8 --sequence-parallel --num-layers 80 --hidden-size 8192 \
  --num-attention-heads 64 --group-query-attention --num-query-groups 8 --seq-length 4096 \
  --max-position-embeddings 4096 --micro-batch-size 1 --global-batch-size 32 --train-iters 100 \
  --lr 1.5e-4 --bf16 --position-embedding-type rope --normalization RMSNorm --swiglu \
  --mock-data --tokenizer-type NullTokenizer --vocab-size 32000
