#!/bin/bash
# the DeepSpeed config named below is in no folder of this repository
deepspeed --num_gpus 8 train.py --deepspeed --deepspeed_config configs/ds_zero2.json \
  --per_device_train_batch_size 4
