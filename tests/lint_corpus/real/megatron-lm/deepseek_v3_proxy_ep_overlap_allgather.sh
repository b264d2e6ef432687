#!/bin/bash
# The DeepSeek-V3 proxy debugged with the allgather dispatcher, the all-to-all overlap left on.
export CUDA_DEVICE_MAX_CONNECTIONS=1

GPUS_PER_NODE=8
NNODES=2
CHECKPOINT_PATH=/lustre/ckpt/dsv3-proxy
DATA_PATH=/lustre/data/fineweb_edu_text_document
TOKENIZER=/models/DeepSeek-V3

MLA_ARGS=(
    --multi-latent-attention
    --q-lora-rank 1536
    --kv-lora-rank 512
    --qk-head-dim 128
    --qk-pos-emb-head-dim 64
    --v-head-dim 128
    --qk-layernorm
    --rope-type yarn
    --rotary-scaling-factor 40
    --mscale 1.0
    --mscale-all-dim 1.0
)

MOE_ARGS=(
    --num-experts 64
    --moe-layer-freq "([0]*1+[1]*15)"
    --moe-ffn-hidden-size 2048
    --moe-shared-expert-intermediate-size 2048
    --moe-router-topk 8
    --moe-router-score-function sigmoid
    --moe-router-enable-expert-bias
    --moe-router-bias-update-rate 1e-3
    --moe-router-num-groups 8
    --moe-router-group-topk 4
    --moe-router-topk-scaling-factor 2.5
    --moe-router-dtype fp32
    --moe-router-load-balancing-type seq_aux_loss
    --moe-aux-loss-coeff 1e-4
    --moe-token-dispatcher-type allgather
    --moe-grouped-gemm
    --mtp-num-layers 1
    --mtp-loss-scaling-factor 0.1
)

torchrun --nproc_per_node $GPUS_PER_NODE --nnodes $NNODES pretrain_gpt.py \
    --num-layers 16 --hidden-size 7168 --ffn-hidden-size 18432 --num-attention-heads 128 \
    --seq-length 4096 --max-position-embeddings 163840 --position-embedding-type rope \
    --normalization RMSNorm --norm-epsilon 1e-6 --swiglu --disable-bias-linear \
    --untie-embeddings-and-output-weights --attention-dropout 0.0 --hidden-dropout 0.0 \
    "${MLA_ARGS[@]}" "${MOE_ARGS[@]}" \
    --tensor-model-parallel-size 2 --pipeline-model-parallel-size 1 \
    --expert-model-parallel-size 8 --expert-tensor-parallel-size 1 \
    --sequence-parallel --use-distributed-optimizer --overlap-moe-expert-parallel-comm \
    --micro-batch-size 1 --global-batch-size 512 \
    --train-iters 20000 --lr 2.2e-4 --min-lr 2.2e-5 --lr-decay-style cosine \
    --lr-warmup-iters 500 --weight-decay 0.1 --clip-grad 1.0 --bf16 \
    --tokenizer-type HuggingFaceTokenizer --tokenizer-model $TOKENIZER \
    --data-path $DATA_PATH --split 99,1,0 \
    --save $CHECKPOINT_PATH --load $CHECKPOINT_PATH --save-interval 1000
