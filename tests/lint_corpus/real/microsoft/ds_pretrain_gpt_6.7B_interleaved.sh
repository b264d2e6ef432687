#!/bin/bash
# GPT-6.7B on microsoft/Megatron-DeepSpeed with interleaved pipeline stages taken from a
# Megatron-LM recipe (--num-layers-per-virtual-pipeline-stage): DeepSpeed's pipeline engine
# runs one stage per rank and has no interleaved schedule.
VOCAB_PATH=data/gpt2-vocab.json
MERGE_PATH=data/gpt2-merges.txt
DATA_PATH=data/meg-gpt2_text_document
CHECKPOINT_PATH=checkpoints/gpt_6.7b

MICRO_BATCH=2
GLOBAL_BATCH=512
TP=2
PP=4
ZERO_STAGE=1

DS_CONFIG=ds_config.json
cat <<EOT > $DS_CONFIG
{
  "train_batch_size": $GLOBAL_BATCH,
  "train_micro_batch_size_per_gpu": $MICRO_BATCH,
  "steps_per_print": 1,
  "zero_optimization": {"stage": $ZERO_STAGE},
  "bf16": {"enabled": true}
}
EOT

deepspeed --num_nodes 4 --num_gpus 8 pretrain_gpt.py \
    --tensor-model-parallel-size $TP \
    --pipeline-model-parallel-size $PP \
    --num-layers-per-virtual-pipeline-stage 2 \
    --num-layers 32 \
    --hidden-size 4096 \
    --num-attention-heads 32 \
    --seq-length 2048 \
    --max-position-embeddings 2048 \
    --micro-batch-size $MICRO_BATCH \
    --global-batch-size $GLOBAL_BATCH \
    --train-iters 200000 \
    --lr 1.2e-4 \
    --min-lr 1.2e-5 \
    --lr-decay-style cosine \
    --lr-warmup-iters 2000 \
    --weight-decay 0.1 \
    --clip-grad 1.0 \
    --bf16 \
    --data-path $DATA_PATH \
    --vocab-file $VOCAB_PATH \
    --merge-file $MERGE_PATH \
    --split 949,50,1 \
    --log-interval 10 \
    --save-interval 5000 \
    --eval-interval 1000 \
    --eval-iters 10 \
    --save $CHECKPOINT_PATH \
    --load $CHECKPOINT_PATH \
    --deepspeed \
    --deepspeed_config $DS_CONFIG \
    --zero-stage $ZERO_STAGE
