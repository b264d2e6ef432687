#!/bin/bash
# Fine-tuning through accelerate + DeepSpeed, hand-written: the accelerate config was copied from
# a 1-node run (8 processes) while the job has 2 nodes, and the Trainer's accumulation drifted
# from the DeepSpeed JSON's batch.
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node=8
srun accelerate launch --config_file accelerate_sft.yaml --machine_rank "$SLURM_NODEID" \
  --deepspeed_config_file accelerate_sft.json \
  sft.py --per_device_train_batch_size 4 --gradient_accumulation_steps 4 --max_steps 1000 --bf16
