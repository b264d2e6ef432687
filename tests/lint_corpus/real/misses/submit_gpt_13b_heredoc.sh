#!/bin/bash
# Submits a GPT 13B run: the job script is written inline, and the training command is built
# inside it as one string, run on every node by bash -c.
# usage: bash submit_gpt_13b_heredoc.sh
# (the global batch 1022 is not a multiple of micro 1 x dp 4 on 32 GPUs with tp 4 x pp 2)
set -euo pipefail

REPO=/lustre/fsw/llm/Megatron-LM
DATA=/lustre/fsw/llm/data/pile_text_document
IMAGE=/lustre/fsw/llm/images/megatron-24.05.sqsh
NODES=4
LOGS=/lustre/fsw/llm/logs/gpt-13b
mkdir -p ${LOGS}

sbatch <<EOF
#!/bin/bash
#SBATCH --job-name=gpt-13b
#SBATCH --nodes=${NODES}
#SBATCH --ntasks-per-node=8
#SBATCH --gpus-per-node=8
#SBATCH --time=04:00:00
#SBATCH --output=${LOGS}/%x_%j.log
#SBATCH --exclusive

export CUDA_DEVICE_MAX_CONNECTIONS=1
export NCCL_IB_SL=1

TRAINING_CMD="cd \$REPO_DIR ; \
  export PYTHONPATH=\$REPO_DIR:\$PYTHONPATH ; \
  python pretrain_gpt.py \
    --tensor-model-parallel-size 4 \
    --pipeline-model-parallel-size 2 \
    --sequence-parallel \
    --num-layers 40 --hidden-size 5120 --num-attention-heads 40 \
    --seq-length 4096 --max-position-embeddings 4096 \
    --micro-batch-size 1 --global-batch-size 1022 \
    --train-iters 50000 --lr 1.0e-4 --min-lr 1.0e-5 --lr-decay-style cosine \
    --lr-warmup-iters 500 --bf16 --use-distributed-optimizer \
    --data-path ${DATA} --tokenizer-type GPT2BPETokenizer \
    --vocab-file \$REPO_DIR/gpt2-vocab.json --merge-file \$REPO_DIR/gpt2-merges.txt \
    --save /lustre/fsw/llm/checkpoints/gpt-13b --save-interval 1000"

srun --container-image=${IMAGE} --container-mounts=/lustre:/lustre \
  --export=ALL,REPO_DIR=${REPO} bash -x -c "\${TRAINING_CMD}"
EOF
