#!/bin/bash
# accelerate launch with an FSDP2 config file; the Trainer's batch flags follow the script.
accelerate launch --config_file fsdp2.yaml train.py \
    --model_name_or_path meta-llama/Meta-Llama-3-8B \
    --per_device_train_batch_size 2 --gradient_accumulation_steps 8 \
    --bf16 --gradient_checkpointing --output_dir out
