#!/bin/bash
# The Trainer fills the stage-3 bucket sizes from the model, but not stage3_max_live_parameters:
# that "auto" reaches DeepSpeed as it is.
torchrun --nproc_per_node 8 sft.py \
    --model_name_or_path meta-llama/Llama-2-13b-hf \
    --per_device_train_batch_size 1 --gradient_accumulation_steps 16 \
    --learning_rate 2e-5 --num_train_epochs 3 --bf16 True \
    --output_dir ./output --deepspeed ./ds_z3.json
