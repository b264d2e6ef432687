#!/bin/bash
# Writes the job script to a temporary file, then submits it (DRY_RUN=1 only prints it).
# (3 nodes of 8 GPUs do not divide over tp 8 x pp 2)
set -euo pipefail

NNODES="${NNODES:-3}"
GPUS_PER_NODE="${GPUS_PER_NODE:-8}"
MEGATRON_PATH="${MEGATRON_PATH:-/workspace/Megatron-LM}"
OUTPUT_DIR="${OUTPUT_DIR:-/lustre/runs/llama3-8b}"

MODEL_ARGS=(
    --num-layers 32
    --hidden-size 4096
    --ffn-hidden-size 14336
    --num-attention-heads 32
    --group-query-attention
    --num-query-groups 8
    --seq-length 8192
    --max-position-embeddings 8192
    --position-embedding-type rope
    --normalization RMSNorm
    --swiglu
)
PARALLEL_ARGS=(
    --tensor-model-parallel-size 8
    --pipeline-model-parallel-size 2
    --sequence-parallel
    --use-distributed-optimizer
)
TRAINING_ARGS=(
    --micro-batch-size 1
    --global-batch-size 128
    --train-iters 20000
    --lr 3e-4
    --min-lr 3e-5
    --lr-warmup-iters 200
    --bf16
    --mock-data
    --tokenizer-type NullTokenizer
    --vocab-size 128256
    --save "${OUTPUT_DIR}/checkpoints"
)
ALL_ARGS=("${MODEL_ARGS[@]}" "${PARALLEL_ARGS[@]}" "${TRAINING_ARGS[@]}")

JOB_SCRIPT=$(mktemp /tmp/llama3_8b_XXXXXX.sh)
cat > "${JOB_SCRIPT}" <<SBATCH_EOF
#!/bin/bash
#SBATCH --nodes=${NNODES}
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node=${GPUS_PER_NODE}
#SBATCH --time=4:00:00
#SBATCH --exclusive

export CUDA_DEVICE_MAX_CONNECTIONS=1
export MASTER_ADDR=\$(scontrol show hostname \${SLURM_NODELIST} | head -n1)

TRAINING_CMD="python -m torch.distributed.run \\
    --nproc_per_node=${GPUS_PER_NODE} \\
    --nnodes=${NNODES} \\
    --master_addr=\\\$MASTER_ADDR \\
    --master_port=6000 \\
    --node_rank=\\\$SLURM_NODEID \\
    ${MEGATRON_PATH}/pretrain_gpt.py \\
    ${ALL_ARGS[*]}"

srun -l --container-workdir=${MEGATRON_PATH} bash -c "\${TRAINING_CMD}"
SBATCH_EOF

if [[ "${DRY_RUN:-0}" == "1" ]]; then
    cat "${JOB_SCRIPT}"
else
    sbatch "${JOB_SCRIPT}"
fi
