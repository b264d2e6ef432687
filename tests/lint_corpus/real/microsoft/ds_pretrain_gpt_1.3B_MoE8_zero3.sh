#!/bin/bash
# GPT-1.3B with 8 experts (DeepSpeed-MoE) on microsoft's fork, sharded with ZeRO-3 to save memory.
DIR=$(pwd)
NUM_LAYERS=24
HIDDEN_SIZE=2048
NUM_ATTN_HEADS=16
SEQ_LEN=2048
GLOBAL_BATCH_SIZE=512
MICRO_BATCH_SIZE=2
NUM_GPUS=32
EP_SIZE=8
NUM_EXPERTS=8
ZERO_STAGE=3
MP_SIZE=1

config_json="${DIR}/ds_config_gpt_1.3B_MoE8.json"
cat <<EOT > ${config_json}
{
  "train_batch_size": ${GLOBAL_BATCH_SIZE},
  "train_micro_batch_size_per_gpu": ${MICRO_BATCH_SIZE},
  "steps_per_print": 10,
  "zero_optimization": {
    "stage": ${ZERO_STAGE},
    "overlap_comm": true,
    "stage3_param_persistence_threshold": 100000
  },
  "gradient_clipping": 1.0,
  "bf16": {"enabled": true},
  "wall_clock_breakdown": false
}
EOT

megatron_options=" \
    --num-layers ${NUM_LAYERS} \
    --hidden-size ${HIDDEN_SIZE} \
    --num-attention-heads ${NUM_ATTN_HEADS} \
    --seq-length ${SEQ_LEN} \
    --max-position-embeddings ${SEQ_LEN} \
    --num-experts ${NUM_EXPERTS} \
    --moe-expert-parallel-size ${EP_SIZE} \
    --topk 2 \
    --moe-loss-coeff 0.01 \
    --create-moe-param-group \
    --tensor-model-parallel-size ${MP_SIZE} \
    --micro-batch-size ${MICRO_BATCH_SIZE} \
    --global-batch-size ${GLOBAL_BATCH_SIZE} \
    --train-iters 100000 \
    --lr 2.0e-4 \
    --min-lr 2.0e-06 \
    --lr-decay-style cosine \
    --lr-warmup-iters 1000 \
    --weight-decay 0.1 \
    --clip-grad 1.0 \
    --bf16 \
    --log-interval 10 \
    --split 949,50,1 \
    --vocab-file gpt2-vocab.json \
    --merge-file gpt2-merges.txt \
    --data-path data/pile_text_document"

deepspeed_options=" \
    --deepspeed \
    --deepspeed_config ${config_json} \
    --zero-stage ${ZERO_STAGE} \
    --pipeline-model-parallel-size 1 \
    --no-pipeline-parallel"

deepspeed --num_nodes 4 --num_gpus 8 pretrain_gpt.py ${megatron_options} ${deepspeed_options}
