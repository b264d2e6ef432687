#!/bin/bash
# Megatron-LM MoE, hand-written: two replicas of the distributed optimizer kept from a 4-node run;
# on 2 nodes with ep 16 the expert data-parallel group is 16 / 16 = 1 rank (parallel_state asserts).
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node=8
srun torchrun --nnodes 2 --nproc_per_node 8 pretrain_gpt.py \
  --num-layers 24 --hidden-size 2048 --num-attention-heads 16 --seq-length 4096 \
  --max-position-embeddings 4096 --micro-batch-size 1 --global-batch-size 128 \
  --num-experts 64 --moe-router-topk 8 --expert-model-parallel-size 16 \
  --train-iters 1000 --lr 3.0e-4 --bf16 --use-distributed-optimizer \
  --num-distributed-optimizer-instances 2 --save /ckpt/run --load /ckpt/run
