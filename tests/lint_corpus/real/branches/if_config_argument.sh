#!/bin/bash
# The DeepSpeed config is the first argument, or a default one; which one is known only when the
# script runs, so it is not checked (a note, not an error).
if [ -z "$1" ]; then
  CONFIG=ds_default.json
else
  CONFIG="$1"
fi
deepspeed --num_nodes 1 --num_gpus 8 train.py --deepspeed --deepspeed_config "$CONFIG"
