#!/bin/bash
# Builds the command in the submitting shell and hands sbatch a heredoc job that runs it with
# bash -c: the global batch 60 is not a multiple of micro 2 x dp 16.
NODES=4
GPUS=8
CMD="torchrun --nnodes $NODES --nproc_per_node $GPUS pretrain_gpt.py \
  --tensor-model-parallel-size 2 --num-layers 24 --hidden-size 2048 --num-attention-heads 16 \
  --seq-length 2048 --max-position-embeddings 2048 --micro-batch-size 2 --global-batch-size 60 \
  --train-iters 1000 --lr 2e-4 --bf16"

sbatch <<EOF
#!/bin/bash
#SBATCH --job-name=gpt-1b
#SBATCH --nodes=$NODES
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node=$GPUS
export CUDA_DEVICE_MAX_CONNECTIONS=1
srun bash -c "${CMD}"
EOF
