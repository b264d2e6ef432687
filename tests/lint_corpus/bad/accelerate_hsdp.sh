#!/bin/bash
# FSDP2 through accelerate, hand-written: the HSDP sizes were kept from a 1-node run
# (2 replicas × 4 shards = 8) while the job has 2 nodes of 8 GPUs (16 processes).
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node=8
srun accelerate launch --config_file accelerate_hsdp.yaml --machine_rank "$SLURM_NODEID" \
  sft.py --per_device_train_batch_size 4 --gradient_accumulation_steps 4 --max_steps 1000 --bf16
