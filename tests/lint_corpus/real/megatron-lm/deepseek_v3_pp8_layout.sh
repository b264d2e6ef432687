#!/bin/bash
# DeepSeek-V3 on 32 nodes: tp 2, pp 8 with 4 virtual stages per rank through a layout (61 layers
# do not divide), ep 32. The layout was written for a 60-layer ablation and not updated.
export CUDA_DEVICE_MAX_CONNECTIONS=1
PP_LAYOUT="Et*2|(tt|)*29,m|L"

torchrun --nproc_per_node 8 --nnodes 32 pretrain_gpt.py \
    --num-layers 61 --hidden-size 7168 --ffn-hidden-size 18432 --num-attention-heads 128 \
    --seq-length 4096 --max-position-embeddings 163840 --position-embedding-type rope \
    --normalization RMSNorm --swiglu --disable-bias-linear --untie-embeddings-and-output-weights \
    --multi-latent-attention --q-lora-rank 1536 --kv-lora-rank 512 --qk-layernorm \
    --num-experts 256 --moe-layer-freq "([0]*3+[1]*58)" --moe-ffn-hidden-size 2048 \
    --moe-shared-expert-intermediate-size 2048 --moe-router-topk 8 \
    --moe-router-score-function sigmoid --moe-router-enable-expert-bias \
    --moe-router-num-groups 8 --moe-router-group-topk 4 --mtp-num-layers 1 \
    --tensor-model-parallel-size 2 --pipeline-model-parallel-size 8 \
    --pipeline-model-parallel-layout "$PP_LAYOUT" \
    --expert-model-parallel-size 32 --expert-tensor-parallel-size 1 \
    --micro-batch-size 1 --global-batch-size 1024 --train-iters 10000 --lr 2.2e-4 --bf16 \
    --mock-data --tokenizer-type NullTokenizer --vocab-size 129280
