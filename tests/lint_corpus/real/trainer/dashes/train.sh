#!/bin/bash
# HfArgumentParser takes the dashed spellings too.
torchrun --nnodes 1 --nproc-per-node 8 train.py \
    --model-name-or-path Qwen/Qwen2.5-7B \
    --per-device-train-batch-size 4 --gradient-accumulation-steps 4 \
    --learning-rate 1e-5 --bf16 --output-dir out --deepspeed ds_auto.json
