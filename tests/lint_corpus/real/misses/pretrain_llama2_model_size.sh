#!/bin/bash
# Llama-2 pre-training with Megatron-LM on 4 nodes; the model size is the first argument:
#   bash pretrain_llama2_model_size.sh [7B|13B|70B] [DATA_PREFIX]
# (the 13B arm's hidden size 5140 is a slip for 5120: 40 heads do not divide it)
set -e
MODEL_SIZE=${1:-7B}
DATA_PREFIX=${2:-/data/redpajama/redpajama_text_document}
NNODES=4
GPUS_PER_NODE=8
export CUDA_DEVICE_MAX_CONNECTIONS=1

case $MODEL_SIZE in
    7B)
        NUM_LAYERS=32; HIDDEN_SIZE=4096; NUM_HEADS=32; FFN_HIDDEN_SIZE=11008; TP=2; PP=1 ;;
    13B)
        NUM_LAYERS=40; HIDDEN_SIZE=5140; NUM_HEADS=40; FFN_HIDDEN_SIZE=13824; TP=4; PP=1 ;;
    70B)
        NUM_LAYERS=80; HIDDEN_SIZE=8192; NUM_HEADS=64; FFN_HIDDEN_SIZE=28672; TP=8; PP=4 ;;
    *)
        echo "unknown model size: $MODEL_SIZE (7B, 13B or 70B)"; exit 1 ;;
esac

torchrun --nnodes $NNODES --nproc_per_node $GPUS_PER_NODE --rdzv_backend c10d \
    --rdzv_endpoint ${MASTER_ADDR:-localhost}:29500 pretrain_gpt.py \
    --tensor-model-parallel-size ${TP} --pipeline-model-parallel-size ${PP} --sequence-parallel \
    --num-layers ${NUM_LAYERS} --hidden-size ${HIDDEN_SIZE} --num-attention-heads ${NUM_HEADS} \
    --ffn-hidden-size ${FFN_HIDDEN_SIZE} --seq-length 4096 --max-position-embeddings 4096 \
    --swiglu --normalization RMSNorm --untie-embeddings-and-output-weights --disable-bias-linear \
    --position-embedding-type rope --micro-batch-size 1 --global-batch-size 1024 \
    --train-iters 250000 --lr 3e-4 --min-lr 3e-5 --lr-decay-style cosine --lr-warmup-iters 2000 \
    --bf16 --use-distributed-optimizer --data-path ${DATA_PREFIX} \
    --tokenizer-type Llama2Tokenizer --tokenizer-model /models/llama2/tokenizer.model
