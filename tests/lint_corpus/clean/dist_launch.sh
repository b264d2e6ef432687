#!/bin/bash
# 2021-style launch on one node: torch.distributed.launch with underscore options.
export CUDA_DEVICE_MAX_CONNECTIONS=1
N_GPUS=8
MP_SIZE=2
python -u -m torch.distributed.launch --nproc_per_node $N_GPUS --nnodes 1 --node_rank 0 \
    --master_addr localhost --master_port 6000 \
    pretrain_gpt.py --tensor-model-parallel-size $MP_SIZE --pipeline-model-parallel-size 1 \
    --num-layers 24 --hidden-size 1024 --num-attention-heads 16 --seq-length 1024 \
    --max-position-embeddings 1024 --micro-batch-size 8 --global-batch-size 64 \
    --train-iters 5000 --lr-warmup-fraction .01 --lr-decay-iters 5000 --fp16
