#!/bin/bash
# ZeRO-3 together with 2 pipeline stages: DeepSpeed's PipelineEngine asserts that ZeRO 2/3 are
# not combined with pipeline parallelism.
NUM_GPUS=8
cat <<EOT > ds_z3.json
{
  "train_batch_size": 128,
  "train_micro_batch_size_per_gpu": 4,
  "zero_optimization": {"stage": 3, "overlap_comm": true},
  "bf16": {"enabled": true}
}
EOT
deepspeed --num_gpus $NUM_GPUS pretrain_gpt.py --tensor-model-parallel-size 1 \
  --pipeline-model-parallel-size 2 --num-layers 24 --hidden-size 2048 --num-attention-heads 16 \
  --seq-length 2048 --max-position-embeddings 2048 --micro-batch-size 4 --global-batch-size 128 \
  --train-iters 1000 --lr 2e-4 --bf16 --deepspeed --deepspeed_config ds_z3.json --zero-stage 3
