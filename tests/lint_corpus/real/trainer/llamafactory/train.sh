#!/bin/bash
# LLaMA-Factory starts torchrun with NNODES x NPROC_PER_NODE and reads the Trainer arguments and
# the DeepSpeed config from its YAML; both are followed.
FORCE_TORCHRUN=1 NNODES=1 NPROC_PER_NODE=8 llamafactory-cli train examples/train_full/llama3_full_sft.yaml
