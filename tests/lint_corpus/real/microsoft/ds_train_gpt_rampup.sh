#!/bin/bash
# Batch-size ramp-up on microsoft's fork (sample-based training): 32 -> 512 in steps of 32.
NNODES=2
GPUS=8
TP=2
MICRO=2
GLOBAL=512
cat <<EOT > ds_config.json
{"train_batch_size": $GLOBAL, "train_micro_batch_size_per_gpu": $MICRO,
 "zero_optimization": {"stage": 1}, "bf16": {"enabled": true}, "gradient_clipping": 1.0}
EOT
torchrun --nnodes $NNODES --nproc_per_node $GPUS --rdzv_backend c10d --rdzv_endpoint "$MASTER_ADDR:29500" \
  pretrain_gpt.py --tensor-model-parallel-size $TP --pipeline-model-parallel-size 1 \
  --num-layers 24 --hidden-size 2048 --num-attention-heads 16 --seq-length 2048 \
  --max-position-embeddings 2048 --micro-batch-size $MICRO --global-batch-size $GLOBAL \
  --rampup-batch-size 32 32 2000000 --train-samples 20000000 --lr-decay-samples 18000000 \
  --lr-warmup-samples 100000 --lr 3e-4 --min-lr 3e-5 --lr-decay-style cosine --bf16 \
  --deepspeed --deepspeed_config ds_config.json --zero-stage 1
