#!/bin/bash
# WarmupDecayLR decays to zero over total_num_steps, which this config does not give.
deepspeed --num_nodes 1 --num_gpus 8 train.py --deepspeed --deepspeed_config ds_config.json
