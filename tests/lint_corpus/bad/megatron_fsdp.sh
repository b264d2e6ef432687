#!/bin/bash
# Megatron-LM with Megatron-FSDP, hand-written: the checkpoint format was kept from the
# distributed-optimizer run it replaced (Megatron-FSDP saves only fsdp_dtensor).
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node=8
srun torchrun --nnodes 2 --nproc_per_node 8 pretrain_gpt.py \
  --num-layers 24 --hidden-size 2048 --num-attention-heads 16 --seq-length 4096 \
  --max-position-embeddings 4096 --micro-batch-size 1 --global-batch-size 128 \
  --train-iters 1000 --lr 3.0e-4 --bf16 --use-distributed-optimizer \
  --use-megatron-fsdp --data-parallel-sharding-strategy optim_grads_params \
  --ckpt-format torch_dist --save /ckpt/run --load /ckpt/run
