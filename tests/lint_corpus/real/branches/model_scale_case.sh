#!/bin/bash
# One script for several sizes; the size is chosen two lines below, so only its arm applies
# (the last arm, with 20 heads, would not fit tp 8).
export CUDA_DEVICE_MAX_CONNECTIONS=1
MODEL_SCALE="7b"
case "$MODEL_SCALE" in
  "7b")
    NLAYERS=32; NHIDDEN=4096; NHEADS=32 ;;
  "13b")
    NLAYERS=40; NHIDDEN=5120; NHEADS=40 ;;
  "custom")
    NLAYERS=16; NHIDDEN=2560; NHEADS=20 ;;
esac
TP=8
torchrun --nnodes 1 --nproc_per_node 8 pretrain_gpt.py --tensor-model-parallel-size $TP \
  --num-layers $NLAYERS --hidden-size $NHIDDEN --num-attention-heads $NHEADS \
  --seq-length 4096 --max-position-embeddings 4096 --micro-batch-size 1 --global-batch-size 64 \
  --train-iters 100 --lr 3e-4 --bf16 --sequence-parallel
