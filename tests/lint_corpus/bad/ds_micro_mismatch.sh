#!/bin/bash
# Megatron-DeepSpeed, heredoc JSON: the JSON's micro batch drifted from the Megatron flag.
export CUDA_DEVICE_MAX_CONNECTIONS=1
MICRO=4
GLOBAL=256
cat <<EOF2 > ds_config.json
{
  "train_micro_batch_size_per_gpu": 2,
  "train_batch_size": $GLOBAL,
  "zero_optimization": {"stage": 1}
}
EOF2
deepspeed --num_nodes 1 --num_gpus 8 pretrain_gpt.py \
  --tensor-model-parallel-size 2 --pipeline-model-parallel-size 1 \
  --num-layers 24 --hidden-size 1024 --num-attention-heads 16 --seq-length 1024 \
  --max-position-embeddings 1024 --micro-batch-size $MICRO --global-batch-size $GLOBAL \
  --train-iters 1000 --deepspeed --deepspeed_config ds_config.json --zero-stage 1
