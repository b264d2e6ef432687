#!/bin/bash
# The heredoc hard-codes the micro batch the script used before it was made a variable.
MICRO_BATCH=4
GLOBAL_BATCH=256
cat <<EOT > ds_config.json
{
  "train_batch_size": $GLOBAL_BATCH,
  "train_micro_batch_size_per_gpu": 2,
  "zero_optimization": {"stage": 1},
  "fp16": {"enabled": true}
}
EOT
torchrun --nnodes 2 --nproc_per_node 8 pretrain_gpt.py --tensor-model-parallel-size 2 \
  --num-layers 24 --hidden-size 2048 --num-attention-heads 16 --seq-length 2048 \
  --max-position-embeddings 2048 --micro-batch-size $MICRO_BATCH --global-batch-size $GLOBAL_BATCH \
  --train-iters 1000 --lr 2e-4 --fp16 --deepspeed --deepspeed_config ds_config.json --zero-stage 1
