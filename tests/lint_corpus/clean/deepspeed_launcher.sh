#!/usr/bin/env bash
# Plain DeepSpeed fine-tuning on one node with 8 GPUs.
set -euo pipefail
deepspeed --num_nodes 1 --num_gpus 8 --master_port 29700 \
    finetune.py --model llama-7b --deepspeed_config ds_zero2.json
