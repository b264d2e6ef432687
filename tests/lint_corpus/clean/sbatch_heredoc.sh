#!/bin/bash
# Submits its job script from a heredoc, with part of the header on the sbatch line.
TP=${TP:-2}
MBS=${MBS:-4}
GBS=${GBS:-256}
sbatch --partition=batch --time=04:00:00 <<EOF
#!/bin/bash
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=8
#SBATCH --gres=gpu:8
#SBATCH --exclusive
export CUDA_DEVICE_MAX_CONNECTIONS=1
srun --mpi=pmix python pretrain_gpt.py \
  --tensor-model-parallel-size ${TP} --num-layers 24 --hidden-size 2048 --num-attention-heads 16 \
  --seq-length 2048 --max-position-embeddings 2048 \
  --micro-batch-size ${MBS} --global-batch-size ${GBS} --train-iters 1000 --bf16
EOF
