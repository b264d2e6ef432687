#!/bin/bash
# GPT-350M with 16 experts (DeepSpeed-MoE) on microsoft's fork, ZeRO-2: the experts' parameters
# get param groups of their own (--create-moe-param-group), as DeepSpeed's ZeRO asks.
NUM_LAYERS=24
HIDDEN_SIZE=1024
NUM_ATTN_HEADS=16
SEQ_LEN=2048
GLOBAL_BATCH_SIZE=256
MICRO_BATCH_SIZE=4
NUM_GPUS=16
EP_SIZE=8
NUM_EXPERTS=16
MOE_LOSS_COEFF=0.01
ZERO_STAGE=2

config_json="ds_config_gpt_350M_MoE16.json"
cat <<EOT > ${config_json}
{
  "train_batch_size": ${GLOBAL_BATCH_SIZE},
  "train_micro_batch_size_per_gpu": ${MICRO_BATCH_SIZE},
  "steps_per_print": 50,
  "zero_optimization": {"stage": ${ZERO_STAGE}, "contiguous_gradients": true},
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
    --topk 1 \
    --moe-loss-coeff ${MOE_LOSS_COEFF} \
    --moe-train-capacity-factor 1.0 \
    --moe-eval-capacity-factor 1.0 \
    --create-moe-param-group \
    --tensor-model-parallel-size 1 \
    --micro-batch-size ${MICRO_BATCH_SIZE} \
    --global-batch-size ${GLOBAL_BATCH_SIZE} \
    --train-samples 73242187 \
    --lr 3.0e-4 \
    --min-lr 1.0e-06 \
    --lr-decay-style cosine \
    --lr-warmup-samples 183105 \
    --weight-decay 0.1 \
    --clip-grad 1.0 \
    --bf16 \
    --log-interval 50 \
    --save-interval 5000 \
    --eval-interval 1000 \
    --eval-iters 10 \
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

deepspeed --num_nodes 2 --num_gpus 8 pretrain_gpt.py ${megatron_options} ${deepspeed_options}
