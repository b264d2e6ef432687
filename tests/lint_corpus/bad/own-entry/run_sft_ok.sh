#!/bin/bash
# a unique prefix is accepted (argparse's allow_abbrev is on by default)
torchrun --standalone --nproc_per_node 4 sft.py --model_path /models/llama-7b \
    --microbatch 2 --plugin gemini --lora_config lora.json
