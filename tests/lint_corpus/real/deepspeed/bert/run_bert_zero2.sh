#!/bin/bash
# BERT pre-training on 1 node: the JSON's batch no longer matches micro x accumulation x 8 GPUs.
NGPU_PER_NODE=8
NUM_NODES=1
deepspeed --num_nodes ${NUM_NODES} --num_gpus ${NGPU_PER_NODE} deepspeed_train.py \
  --cf bert_large.json --max_seq_length 128 --output_dir out \
  --deepspeed --deepspeed_config deepspeed_bsz1024_zero2_config.json --print_steps 100
