#!/bin/bash
# Defaults, then an argument loop that may change them: each arm is read as one alternative;
# the defaults pass, and --debug's global batch of 3 is a warning that names its arm.
export CUDA_DEVICE_MAX_CONNECTIONS=1
NODES=1
GPUS=8
MICRO=1
GBS=64
TP=2
while [[ $# -gt 0 ]]; do
  case "$1" in
    --nodes) NODES="$2"; shift 2 ;;
    --gbs) GBS="$2"; shift 2 ;;
    --debug) GBS=3; shift ;;
    *) echo "unknown option $1"; exit 1 ;;
  esac
done
torchrun --nnodes $NODES --nproc_per_node $GPUS pretrain_gpt.py --tensor-model-parallel-size $TP \
  --num-layers 24 --hidden-size 2048 --num-attention-heads 16 --seq-length 2048 \
  --max-position-embeddings 2048 --micro-batch-size $MICRO --global-batch-size $GBS \
  --train-iters 1000 --lr 2e-4 --bf16
