#!/bin/bash
# DeepSpeed's PipelineModule example: the stages (-p) are the script's own argument.
deepspeed --num_nodes 1 --num_gpus 4 train.py --deepspeed_config ds_config.json -p 2 --steps 200
