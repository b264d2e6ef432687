#!/bin/bash
# microsoft's fork keeps --checkpoint-activations for DeepSpeed's activation checkpointing (its
# validate_args has the Megatron-LM refusal commented out), so this is fine here.
cat <<EOT > ds_config.json
{"train_batch_size": 32, "train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 4,
 "zero_optimization": {"stage": 1}, "bf16": {"enabled": true}}
EOT
deepspeed --num_gpus 8 pretrain_gpt.py --tensor-model-parallel-size 1 --pipeline-model-parallel-size 1 \
  --num-layers 48 --hidden-size 6144 --num-attention-heads 48 --seq-length 2048 \
  --max-position-embeddings 2048 --micro-batch-size 1 --global-batch-size 32 --train-iters 100 \
  --lr 1e-4 --bf16 --use-flash-attn-v2 --checkpoint-activations --checkpoint-num-layers 1 \
  --deepspeed --deepspeed_config ds_config.json --zero-stage 1 --deepspeed-activation-checkpointing
