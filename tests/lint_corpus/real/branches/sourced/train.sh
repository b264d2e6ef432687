#!/bin/bash
# The model and layout come from a sourced file beside the script.
source ./config_13b.sh
export CUDA_DEVICE_MAX_CONNECTIONS=1
torchrun --nnodes $NNODES --nproc-per-node $GPUS_PER_NODE pretrain_gpt.py \
  --tensor-model-parallel-size $TP --pipeline-model-parallel-size $PP \
  --num-layers $NUM_LAYERS --hidden-size $HIDDEN --num-attention-heads $HEADS \
  --seq-length $SEQ --max-position-embeddings $SEQ --micro-batch-size $MBS \
  --global-batch-size $GBS --train-iters 20000 --lr 3e-4 --bf16
