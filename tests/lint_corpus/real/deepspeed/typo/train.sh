#!/bin/bash
deepspeed --num_nodes 1 --num_gpus 4 train.py --deepspeed --deepspeed_config ds_config.json --epochs 3
