#!/bin/bash
# Llama-3-8B context extension to 16k: the sequence length was raised, the position table
# (--max-position-embeddings) was left at the pretraining 8k.

export CUDA_DEVICE_MAX_CONNECTIONS=1
export NVTE_FUSED_ATTN=1

GPUS_PER_NODE=8
NUM_NODES=${SLURM_NNODES:-4}
MASTER_ADDR=${MASTER_ADDR:-localhost}
MASTER_PORT=${MASTER_PORT:-6000}
NODE_RANK=${SLURM_NODEID:-0}

CHECKPOINT_PATH=/checkpoints/llama3-8b-16k
PRETRAINED=/checkpoints/llama3-8b-mcore
TOKENIZER=meta-llama/Meta-Llama-3-8B
DATA_PATH=/data/long/long_text_document

DISTRIBUTED_ARGS=(
    --nproc_per_node $GPUS_PER_NODE
    --nnodes $NUM_NODES
    --node_rank $NODE_RANK
    --master_addr $MASTER_ADDR
    --master_port $MASTER_PORT
)

MODEL_ARGS=(
    --num-layers 32
    --hidden-size 4096
    --ffn-hidden-size 14336
    --num-attention-heads 32
    --group-query-attention
    --num-query-groups 8
    --kv-channels 128
    --seq-length 16384
    --max-position-embeddings 8192
    --position-embedding-type rope
    --rotary-base 1000000
    --normalization RMSNorm
    --swiglu
    --untie-embeddings-and-output-weights
    --disable-bias-linear
)

TRAINING_ARGS=(
    --micro-batch-size 1
    --global-batch-size 64
    --train-iters 1000
    --lr 1.0e-5
    --min-lr 1.0e-6
    --lr-decay-style cosine
    --lr-warmup-iters 50
    --weight-decay 0.1
    --clip-grad 1.0
    --bf16
    --finetune
    --no-load-optim
)

MODEL_PARALLEL_ARGS=(
    --tensor-model-parallel-size 4
    --context-parallel-size 2
    --sequence-parallel
    --use-distributed-optimizer
)

torchrun ${DISTRIBUTED_ARGS[@]} pretrain_gpt.py \
    ${MODEL_ARGS[@]} \
    ${TRAINING_ARGS[@]} \
    ${MODEL_PARALLEL_ARGS[@]} \
    --data-path $DATA_PATH \
    --tokenizer-type HuggingFaceTokenizer \
    --tokenizer-model $TOKENIZER \
    --log-interval 10 \
    --save-interval 500 \
    --eval-interval 500 \
    --eval-iters 0 \
    --pretrained-checkpoint $PRETRAINED \
    --save $CHECKPOINT_PATH
