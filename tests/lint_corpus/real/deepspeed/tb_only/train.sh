#!/bin/bash
# Only train_batch_size: DeepSpeed takes accumulation 1 and micro = 100 / 8, which it refuses.
deepspeed --num_nodes 1 --num_gpus 8 train.py --deepspeed --deepspeed_config ds_config.json
