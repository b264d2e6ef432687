#!/bin/bash
# The LoRA option moved to a JSON config; this script still passes the old one.
torchrun --standalone --nproc_per_node 4 sft.py --model_path /models/llama-7b \
    --microbatch_size 2 --plugin zero2 --lora_rank 32
