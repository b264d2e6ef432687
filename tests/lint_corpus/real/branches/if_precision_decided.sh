#!/bin/bash
# The precision switch is set in the script; only the bf16 branch runs, which matches the config.
USE_BF16=1
if [ "$USE_BF16" -eq 1 ]; then
  PRECISION="--bf16"
  DS_PRECISION='"bf16": {"enabled": true}'
else
  PRECISION="--fp16"
  DS_PRECISION='"fp16": {"enabled": true}'
fi
cat <<EOT > ds_config.json
{"train_batch_size": 64, "train_micro_batch_size_per_gpu": 4, "zero_optimization": {"stage": 1},
 $DS_PRECISION}
EOT
deepspeed --num_nodes 1 --num_gpus 8 pretrain_gpt.py --tensor-model-parallel-size 2 \
  --num-layers 24 --hidden-size 2048 --num-attention-heads 16 --seq-length 2048 \
  --max-position-embeddings 2048 --micro-batch-size 4 --global-batch-size 64 --train-iters 1000 \
  --lr 2e-4 $PRECISION --deepspeed --deepspeed_config ds_config.json --zero-stage 1
