#!/bin/bash
# The config's numbers and the Trainer's arguments disagree: the Trainer stops with "Please
# correct the following DeepSpeed config values that mismatch TrainingArguments values".
deepspeed --num_nodes 1 --num_gpus 8 train.py --per_device_train_batch_size 4 \
    --gradient_accumulation_steps 4 --bf16 --output_dir out --deepspeed ds_config.json
