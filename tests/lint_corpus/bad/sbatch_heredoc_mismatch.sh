#!/bin/bash
sbatch <<EOF
#!/bin/bash
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node=8
srun torchrun --nnodes 2 --nproc_per_node 4 train.py --deepspeed_config ds_heredoc_job.json
EOF
