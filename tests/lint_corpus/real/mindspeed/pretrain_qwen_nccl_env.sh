#!/bin/bash
# NCCL tuning copied from a GPU cluster's script onto Ascend NPUs, where HCCL is used instead.
export CUDA_DEVICE_MAX_CONNECTIONS=1
export NCCL_IB_DISABLE=0
export NCCL_SOCKET_IFNAME=eth0
export HCCL_CONNECT_TIMEOUT=1200
torchrun --nproc_per_node 8 --nnodes 1 pretrain_gpt.py \
    --use-mcore-models --tensor-model-parallel-size 4 --pipeline-model-parallel-size 1 \
    --sequence-parallel --num-layers 28 --hidden-size 3584 --num-attention-heads 28 \
    --group-query-attention --num-query-groups 4 --seq-length 4096 --max-position-embeddings 32768 \
    --micro-batch-size 1 --global-batch-size 64 --train-iters 2000 --lr 1.25e-6 --bf16 \
    --position-embedding-type rope --normalization RMSNorm --use-fused-rmsnorm --swiglu \
    --use-fused-swiglu --use-flash-attn --tokenizer-type PretrainedFromHF \
    --tokenizer-name-or-path ./model_from_hf/qwen2.5-7b-hf --data-path ./dataset/alpaca_text_document
