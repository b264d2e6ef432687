#!/bin/bash
# DeepSpeedExamples style: the training script calls deepspeed.initialize with the config named
# by --deepspeed_config (DeepSpeed's own argument, next to its --deepspeed switch).
deepspeed --num_nodes 1 --num_gpus 8 cifar10_deepspeed.py --deepspeed --deepspeed_config ds_config.json $@
