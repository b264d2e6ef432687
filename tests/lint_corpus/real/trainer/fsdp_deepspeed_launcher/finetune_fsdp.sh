#!/bin/bash
# Full fine-tuning of Llama-3-8B with FSDP, moved off ZeRO-3: the --deepspeed config is gone and
# --fsdp took its place, but the run is still started by the DeepSpeed launcher.
set -euo pipefail

MODEL=meta-llama/Meta-Llama-3-8B
OUTPUT_DIR=${OUTPUT_DIR:-./output/llama3-8b-sft-fsdp}

deepspeed --num_gpus 8 --master_port 29501 train.py \
    --model_name_or_path $MODEL \
    --data_path ./data/alpaca_data.json \
    --bf16 True \
    --output_dir $OUTPUT_DIR \
    --num_train_epochs 3 \
    --per_device_train_batch_size 4 \
    --per_device_eval_batch_size 4 \
    --gradient_accumulation_steps 4 \
    --eval_strategy "no" \
    --save_strategy "steps" \
    --save_steps 2000 \
    --save_total_limit 1 \
    --learning_rate 2e-5 \
    --weight_decay 0. \
    --warmup_ratio 0.03 \
    --lr_scheduler_type "cosine" \
    --logging_steps 1 \
    --fsdp "full_shard auto_wrap" \
    --fsdp_transformer_layer_cls_to_wrap 'LlamaDecoderLayer' \
    --tf32 True
