#!/bin/bash
# ZeRO-3 with parameters and optimizer states offloaded to CPU, over 2 nodes from a hostfile.
deepspeed --hostfile=hostfile --num_nodes 2 --num_gpus 8 --master_port 29600 finetune.py \
    --deepspeed --deepspeed_config ds_zero3_offload.json --model_name opt-13b --epochs 1
