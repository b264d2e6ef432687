#!/bin/bash
# gpt-oss-20b continued pretraining on one node: attention sinks, alternating 128-token sliding
# windows, the clamped quick-GEGLU, biases everywhere, YaRN x32 from 4096 (core_v0.19 or main).
export CUDA_DEVICE_MAX_CONNECTIONS=1
CKPT=${CKPT:-/ckpt/gpt-oss-20b}

MODEL_ARGS=(
    --num-layers 24 --hidden-size 2880 --ffn-hidden-size 2880
    --num-attention-heads 64 --group-query-attention --num-query-groups 8 --kv-channels 64
    --seq-length 4096 --max-position-embeddings 131072
    --normalization RMSNorm --norm-epsilon 1e-5
    --quick-geglu --glu-linear-offset 1.0 --activation-func-clamp-value 7.0
    --softmax-type learnable --window-size 128,0 --window-attn-skip-freq 2
    --position-embedding-type yarn --rotary-base 150000 --rotary-scaling-factor 32
    --yarn-original-max-position-embeddings 4096 --no-yarn-correction-range-round-to-int
    --untie-embeddings-and-output-weights --attention-dropout 0.0 --hidden-dropout 0.0
)
MOE_ARGS=(
    --num-experts 32 --moe-router-topk 4 --moe-router-load-balancing-type aux_loss
    --moe-aux-loss-coeff 0.9 --moe-token-dispatcher-type alltoall --moe-router-dtype fp32
)
torchrun --nproc_per_node 8 pretrain_gpt.py "${MODEL_ARGS[@]}" "${MOE_ARGS[@]}" \
    --tensor-model-parallel-size 2 --expert-model-parallel-size 4 --expert-tensor-parallel-size 1 \
    --micro-batch-size 1 --global-batch-size 64 --train-iters 5000 --lr 3e-5 --min-lr 3e-6 \
    --lr-decay-style cosine --lr-warmup-iters 100 --bf16 --use-distributed-optimizer \
    --tokenizer-type HuggingFaceTokenizer --tokenizer-model /models/gpt-oss-20b \
    --data-path /data/cpt_text_document --save "$CKPT" --load "$CKPT" --save-interval 500
