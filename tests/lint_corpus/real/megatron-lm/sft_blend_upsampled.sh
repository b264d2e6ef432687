#!/bin/bash
# Supervised fine-tuning of a 7B model on a small instruction mixture, upsampled by repetition:
# each doubling line below repeats the blend (2^12 copies of its 2 datasets). The array grows
# past what the linter follows (10,000 elements), so the reading stops there, an error rather
# than a silent pass.
export CUDA_DEVICE_MAX_CONNECTIONS=1

MIX=(1 /data/sft/oasst1_text_document 1 /data/sft/dolly15k_text_document)
MIX=("${MIX[@]}" "${MIX[@]}")
MIX=("${MIX[@]}" "${MIX[@]}")
MIX=("${MIX[@]}" "${MIX[@]}")
MIX=("${MIX[@]}" "${MIX[@]}")
MIX=("${MIX[@]}" "${MIX[@]}")
MIX=("${MIX[@]}" "${MIX[@]}")
MIX=("${MIX[@]}" "${MIX[@]}")
MIX=("${MIX[@]}" "${MIX[@]}")
MIX=("${MIX[@]}" "${MIX[@]}")
MIX=("${MIX[@]}" "${MIX[@]}")
MIX=("${MIX[@]}" "${MIX[@]}")
MIX=("${MIX[@]}" "${MIX[@]}")

torchrun --nproc_per_node 8 pretrain_gpt.py \
    --tensor-model-parallel-size 2 \
    --num-layers 32 \
    --hidden-size 4096 \
    --num-attention-heads 32 \
    --seq-length 4096 \
    --max-position-embeddings 4096 \
    --micro-batch-size 1 \
    --global-batch-size 128 \
    --train-iters 2000 \
    --lr 2e-5 \
    --bf16 \
    --data-path "${MIX[@]}" \
    --tokenizer-type Llama2Tokenizer \
    --tokenizer-model /models/llama2/tokenizer.model \
    --finetune \
    --load /checkpoints/llama2-7b-mcore \
    --save /checkpoints/llama2-7b-sft
