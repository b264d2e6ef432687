#!/bin/bash
# Pre-trains a LLaMA-2 model with the Megatron patch: every setting is an argument, each with a
# default (the 7B model on one 8-GPU machine):
# sh run_pretrain_megatron_llama.sh dsw /workspace/Megatron-Patch 13B 1 32 1e-5 1e-6 4096 bf16 4 1 sel true true true 100000 /mnt/wudao none 100000000000 1000000000 /mnt/output
# (the 13B row of the size table has hidden 5140, not 5120: not a multiple of its 40 heads)
set -e
ENV=${1:-dsw}
PATCH_ROOT=${2:-/workspace/Megatron-Patch}
MEGATRON_PATH=${PATCH_ROOT}/Megatron-LM
export PYTHONPATH=${MEGATRON_PATH}:${PATCH_ROOT}:$PYTHONPATH
export CUDA_DEVICE_MAX_CONNECTIONS=1

if [ $ENV = dsw ]; then
    export CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7
    MASTER_ADDR=localhost
    MASTER_PORT=$(shuf -n 1 -i 10000-65535)
    NNODES=1
    NODE_RANK=0
    GPUS_PER_NODE=8
elif [ $ENV = dlc ]; then
    NNODES=${WORLD_SIZE}
    NODE_RANK=${RANK}
    GPUS_PER_NODE=${KUBERNETES_CONTAINER_RESOURCE_GPU}
fi

DISTRIBUTED_ARGS="--nproc_per_node $GPUS_PER_NODE --nnodes $NNODES --node_rank $NODE_RANK --master_addr $MASTER_ADDR --master_port $MASTER_PORT"

MODEL_SIZE=${3:-7B}
BATCH_SIZE=${4:-1}
GLOBAL_BATCH_SIZE=${5:-32}
LR=${6:-1e-5}
MIN_LR=${7:-1e-6}
SEQ_LEN=${8:-4096}
PR=${9:-bf16}
TP=${10:-2}
PP=${11:-1}
AC=${12:-sel}
DO=${13:-true}
TE=${14:-true}
SP=${15:-true}
SAVE_INTERVAL=${16:-100000}
DATASET_PATH=${17:-/mnt/llama2-datasets/wudao_llamabpe_text_document}
PRETRAIN_CHECKPOINT_PATH=${18:-none}
TRAIN_TOKENS=${19:-100000000000}
WARMUP_TOKENS=${20:-1000000000}
OUTPUT_BASEPATH=${21:-/mnt/output_megatron_llama2}

if [ $MODEL_SIZE = 7B ]; then

NUM_LAYERS=32
HIDDEN_SIZE=4096
NUM_ATTN_HEADS=32
INTERMEDIATE_SIZE=11008
gqa_options=""

elif [ $MODEL_SIZE = 13B ]; then

NUM_LAYERS=40
HIDDEN_SIZE=5140
NUM_ATTN_HEADS=40
INTERMEDIATE_SIZE=13824
gqa_options=""

elif [ $MODEL_SIZE = 70B ]; then

NUM_LAYERS=80
HIDDEN_SIZE=8192
NUM_ATTN_HEADS=64
INTERMEDIATE_SIZE=28672
gqa_options=" \
    --group-query-attention \
    --num-query-groups 8"

fi

if [ $AC = full ]; then
    activation_checkpoint_options=" \
        --recompute-method uniform \
        --recompute-granularity full"
elif [ $AC = sel ]; then
    activation_checkpoint_options=" \
        --recompute-activations"
elif [ $AC = none ]; then
    activation_checkpoint_options=" \
    "
fi

if [ $PR = fp16 ]; then
    pr_options=" \
        --fp16"
elif [ $PR = bf16 ]; then
    pr_options=" \
        --bf16"
fi

if [ $DO = true ]; then
    do_options=" \
        --use-distributed-optimizer"
elif [ $DO = false ]; then
    do_options=" \
    "
fi

if [ $TE = true ]; then
    te_options=" \
        --transformer-impl transformer_engine"
elif [ $TE = false ]; then
    te_options=" \
        --transformer-impl local"
fi

if [ $SP = true ] && [ $TP -gt 1 ]; then
    sp_options=" \
        --sequence-parallel"
elif [ $SP = false ]; then
    sp_options=" \
    "
fi

load_options=""
if [ $PRETRAIN_CHECKPOINT_PATH != none ]; then
    load_options=" \
        --load $PRETRAIN_CHECKPOINT_PATH"
fi

TRAIN_ITERS=$(( ${TRAIN_TOKENS} / ${GLOBAL_BATCH_SIZE} / ${SEQ_LEN} ))
LR_WARMUP_ITERS=$(( ${WARMUP_TOKENS} / ${GLOBAL_BATCH_SIZE} / ${SEQ_LEN} ))

NAME="pretrain-llama-${MODEL_SIZE}-lr-${LR}-bs-${BATCH_SIZE}-gbs-${GLOBAL_BATCH_SIZE}-tp-${TP}-pp-${PP}"
mkdir -p "${OUTPUT_BASEPATH}/tensorboard/"
mkdir -p "${OUTPUT_BASEPATH}/checkpoint/"
SAVED_PRETRAIN_CHECKPOINT_PATH="${OUTPUT_BASEPATH}/checkpoint/${NAME}"

megatron_options=" \
        --save ${SAVED_PRETRAIN_CHECKPOINT_PATH} \
        --train-data-path ${DATASET_PATH} \
        --lr ${LR} \
        --min-lr ${MIN_LR} \
        --lr-decay-style linear \
        --adam-beta1 0.9 \
        --adam-beta2 0.95 \
        --weight-decay 0.1 \
        --clip-grad 1.0 \
        --init-method-std 0.006 \
        --lr-decay-iters ${TRAIN_ITERS} \
        --lr-warmup-iters ${LR_WARMUP_ITERS} \
        --train-iters ${TRAIN_ITERS} \
        --micro-batch-size ${BATCH_SIZE} \
        --global-batch-size ${GLOBAL_BATCH_SIZE} \
        --num-layers ${NUM_LAYERS} \
        --hidden-size ${HIDDEN_SIZE} \
        --num-attention-heads ${NUM_ATTN_HEADS} \
        --ffn-hidden-size ${INTERMEDIATE_SIZE} \
        --seq-length ${SEQ_LEN} \
        --max-position-embeddings ${SEQ_LEN} \
        --log-interval 1 \
        --eval-interval 10000 \
        --eval-iters 10 \
        --save-interval ${SAVE_INTERVAL} \
        --tensorboard-dir ${OUTPUT_BASEPATH}/tensorboard/${NAME} \
        --tensor-model-parallel-size ${TP} \
        --pipeline-model-parallel-size ${PP} \
        --num-workers 8 \
        --seed 1234 \
        --swiglu \
        --normalization RMSNorm \
        --position-embedding-type rope \
        --untie-embeddings-and-output-weights \
        --disable-bias-linear"

torchrun $DISTRIBUTED_ARGS pretrain_megatron_llama.py \
 ${megatron_options} ${pr_options} ${load_options} ${activation_checkpoint_options} ${do_options} ${te_options} ${sp_options} ${gqa_options}
