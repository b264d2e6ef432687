#!/bin/bash
# Written for megatron-core 0.8, run on current Megatron-LM: the legacy-model switch and the
# async all-reduce switch are gone from its parser.
export CUDA_DEVICE_MAX_CONNECTIONS=1
torchrun --nproc_per_node 8 --nnodes 1 pretrain_gpt.py \
    --use-legacy-models \
    --no-async-tensor-model-parallel-allreduce \
    --tensor-model-parallel-size 2 --num-layers 24 --hidden-size 2048 --num-attention-heads 16 \
    --seq-length 2048 --max-position-embeddings 2048 --micro-batch-size 4 --global-batch-size 64 \
    --train-iters 1000 --lr 3e-4 --bf16 --mock-data --tokenizer-type NullTokenizer --vocab-size 50304
