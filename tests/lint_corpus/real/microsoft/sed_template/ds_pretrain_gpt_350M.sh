#!/bin/bash
# GPT-350M on microsoft/Megatron-DeepSpeed: the DeepSpeed config is filled in from a template
# by a chain of sed substitutions, as the fork's example scripts do.
MODEL_SIZE=0.35
NUM_LAYERS=24
HIDDEN_SIZE=1024
NUM_ATTN_HEADS=16
GLOBAL_BATCH_SIZE=256
BATCH_SIZE=4
ZERO_STAGE=1
LOG_INTERVAL=10
NUM_GPUS_PERNODE=8
NUM_NODE=1
MP_SIZE=1
PP_SIZE=1
NAME="gpt-${MODEL_SIZE}B-lr-3e-4-minlr-3e-5-bs-${GLOBAL_BATCH_SIZE}-gpus-${NUM_GPUS_PERNODE}"

template_json="ds_config_gpt_TEMPLATE.json"
config_json="ds_config_gpt_${NAME}.json"
if [[ $ZERO_STAGE -gt 0 ]]; then
sed "s/CONFIG_BATCH_SIZE/${GLOBAL_BATCH_SIZE}/" ${template_json} \
    | sed "s/CONFIG_MBSIZE/${BATCH_SIZE}/" \
    | sed "s/LOG_INTERVAL/${LOG_INTERVAL}/" \
    | sed "s/ZERO_STAGE/${ZERO_STAGE}/" \
    | sed "s/PRESCALE_GRAD/false/" \
    | sed "s/CONFIG_FP16_ENABLED/true/" \
    | sed "s/CONFIG_BF16_ENABLED/false/" \
      > ${config_json}
else
sed "s/CONFIG_BATCH_SIZE/${GLOBAL_BATCH_SIZE}/" ${template_json} \
    | sed "s/CONFIG_MBSIZE/${BATCH_SIZE}/" \
    | sed "s/LOG_INTERVAL/${LOG_INTERVAL}/" \
    | sed "s/ZERO_STAGE/${ZERO_STAGE}/" \
    | sed "s/PRESCALE_GRAD/true/" \
    | sed "s/CONFIG_FP16_ENABLED/true/" \
    | sed "s/CONFIG_BF16_ENABLED/false/" \
      > ${config_json}
fi

megatron_options=" \
    --tensor-model-parallel-size ${MP_SIZE} \
    --pipeline-model-parallel-size ${PP_SIZE} \
    --num-layers ${NUM_LAYERS} \
    --hidden-size ${HIDDEN_SIZE} \
    --num-attention-heads ${NUM_ATTN_HEADS} \
    --seq-length 2048 \
    --max-position-embeddings 2048 \
    --micro-batch-size ${BATCH_SIZE} \
    --global-batch-size ${GLOBAL_BATCH_SIZE} \
    --train-tokens 300000000000 \
    --train-samples 146484375 \
    --lr 3.0e-4 \
    --min-lr 3.0e-5 \
    --lr-decay-style cosine \
    --log-interval ${LOG_INTERVAL} \
    --fp16 \
    --vocab-file gpt2-vocab.json \
    --merge-file gpt2-merges.txt \
    --data-path data/pile_text_document"

deepspeed_options=" \
    --deepspeed \
    --deepspeed_config ${config_json} \
    --zero-stage ${ZERO_STAGE} \
    --pipeline-model-parallel-size ${PP_SIZE} \
    --no-pipeline-parallel"

deepspeed --num_nodes ${NUM_NODE} --num_gpus ${NUM_GPUS_PERNODE} pretrain_gpt.py \
    ${megatron_options} ${deepspeed_options} &> ${NAME}.log
