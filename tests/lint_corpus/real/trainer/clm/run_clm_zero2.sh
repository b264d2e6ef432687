#!/bin/bash
# transformers' run_clm.py under the DeepSpeed launcher: TrainingArguments' --deepspeed names the
# config, whose "auto" values the Trainer fills from its own arguments.
deepspeed --num_gpus 8 run_clm.py \
    --model_name_or_path gpt2-large \
    --dataset_name wikitext --dataset_config_name wikitext-2-raw-v1 \
    --per_device_train_batch_size 4 \
    --gradient_accumulation_steps 2 \
    --learning_rate 5e-5 --warmup_steps 100 --num_train_epochs 3 \
    --bf16 \
    --do_train --do_eval \
    --output_dir /tmp/test-clm \
    --deepspeed ds_config_zero2.json
