#!/bin/bash
# FP8 on Ascend: the 910B has no FP8 tensor cores and MindSpeed-LLM no Transformer Engine FP8.
export CUDA_DEVICE_MAX_CONNECTIONS=1
export HCCL_CONNECT_TIMEOUT=1200
torchrun --nproc_per_node 8 --nnodes 1 pretrain_gpt.py \
    --use-mcore-models --tensor-model-parallel-size 2 --pipeline-model-parallel-size 1 \
    --num-layers 32 --hidden-size 4096 --num-attention-heads 32 --seq-length 4096 \
    --max-position-embeddings 4096 --micro-batch-size 1 --global-batch-size 64 --train-iters 100 \
    --lr 1e-5 --bf16 --fp8-format hybrid --use-fused-rmsnorm --normalization RMSNorm --swiglu \
    --use-flash-attn --tokenizer-type Llama2Tokenizer --tokenizer-model ./tokenizer.model
