#!/bin/bash
# FSDP2 with tensor parallelism through accelerate, hand-written: tp over the whole node leaves
# FSDP2 nothing to shard over (dp_shard 1, cp 1), which accelerate refuses.
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node=8
srun accelerate launch --config_file accelerate_tp.yaml --machine_rank "$SLURM_NODEID" \
  sft.py --per_device_train_batch_size 4 --gradient_accumulation_steps 4 --max_steps 1000 --bf16
