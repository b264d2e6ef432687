#!/bin/bash
# t5-large on WMT16 en-ro under DeepSpeed ZeRO-2. The config hands DeepSpeed the scheduler
# (WarmupDecayLR), whose "auto" warmup the Trainer fills in from --warmup_steps.
export BS=8

deepspeed --num_gpus=4 examples/pytorch/translation/run_translation.py \
    --deepspeed ds_config_zero2.json \
    --model_name_or_path google-t5/t5-large \
    --per_device_train_batch_size $BS \
    --gradient_accumulation_steps 2 \
    --output_dir output_dir --overwrite_output_dir \
    --fp16 \
    --do_train --max_train_samples 500 --num_train_epochs 1 \
    --dataset_name wmt16 --dataset_config "ro-en" \
    --source_lang en --target_lang ro \
    --source_prefix "translate English to Romanian: " \
    --learning_rate 3e-4 \
    --warmup_steps 0 \
    --max_source_length 128 --max_target_length 128
