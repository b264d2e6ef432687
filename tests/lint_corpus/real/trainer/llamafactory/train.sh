#!/bin/bash
# LLaMA-Factory reads everything from its YAML (deepspeed config included); nothing to check here.
FORCE_TORCHRUN=1 NNODES=1 NPROC_PER_NODE=8 llamafactory-cli train examples/train_full/llama3_full_sft.yaml
