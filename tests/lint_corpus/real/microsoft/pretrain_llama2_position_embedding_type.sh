#!/bin/bash
# The microsoft fork's Llama recipe with Megatron-LM's rotary spelling: this fork's parser has no
# --position-embedding-type (it takes --use-rotary-position-embeddings), so it stops at start-up.
DS_CONFIG=./ds_config.json
cat <<EOT > $DS_CONFIG
{
  "train_batch_size": 64,
  "train_micro_batch_size_per_gpu": 2,
  "zero_optimization": {"stage": 1},
  "bf16": {"enabled": true}
}
EOT
torchrun --nproc_per_node 8 --nnodes 1 pretrain_gpt.py \
  --tensor-model-parallel-size 4 --pipeline-model-parallel-size 1 \
  --num-layers 32 --hidden-size 4096 --ffn-hidden-size 11008 --num-attention-heads 32 \
  --num-key-value-heads 8 --seq-length 4096 --max-position-embeddings 4096 \
  --micro-batch-size 2 --global-batch-size 64 --train-iters 1000 --lr 3e-4 \
  --position-embedding-type rope --swiglu --normalization rmsnorm --disable-bias-linear \
  --untie-embeddings-and-output-weights --use-flash-attn-v2 --bf16 \
  --deepspeed --deepspeed_config $DS_CONFIG --zero-stage 1
