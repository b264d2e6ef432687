#!/bin/bash
# LLaMA-Factory's entry point under torchrun with its YAML as the argument; the config's
# train_batch_size 64 is not micro 1 x accumulation 4 x 8 GPUs = 32.
torchrun --nnodes 1 --nproc_per_node 8 src/train.py examples/sft.yaml
