#!/bin/bash
# A Switch-style top-1 MoE ablation (softmax router, 16 experts) on Megatron-LM.
export CUDA_DEVICE_MAX_CONNECTIONS=1
torchrun --nproc_per_node 8 pretrain_gpt.py \
    --num-layers 12 --hidden-size 768 --num-attention-heads 12 --seq-length 1024 \
    --max-position-embeddings 1024 --num-experts 16 --moe-router-topk 1 \
    --moe-router-load-balancing-type aux_loss --moe-aux-loss-coeff 1e-2 \
    --expert-model-parallel-size 8 --micro-batch-size 8 --global-batch-size 256 \
    --train-iters 20000 --lr 6e-4 --min-lr 6e-5 --lr-decay-style cosine --lr-warmup-iters 200 \
    --bf16 --mock-data --tokenizer-type NullTokenizer --vocab-size 50257
