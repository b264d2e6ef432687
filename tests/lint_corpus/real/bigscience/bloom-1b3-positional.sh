#!/bin/bash
# Launched once per node by an outer scheduler: bash bloom-1b3-positional.sh ADDR PORT NNODES RANK
export OMP_NUM_THREADS=16
DATA_PATH=data/oscar_en_text_document
RUN_PATH=1b3_run
CHECKPOINT_PATH=$RUN_PATH/checkpoint
TENSORBOARD_PATH=$RUN_PATH/tensorboard
TOKENIZER_NAME_OR_PATH=bigscience/tokenizer

MASTER_ADDR=$1
MASTER_PORT=$2
NNODES=$3
NODE_RANK=$4

GPUS_PER_NODE=8
TP_SIZE=1
PP_SIZE=2

MICRO_BATCH_SIZE=4
GLOBAL_BATCH_SIZE=512

NLAYERS=24
NHIDDEN=2048
NHEADS=16
SEQ_LEN=2048
ZERO_STAGE=1

config_json="./ds_config.json"
cat <<EOT > $config_json
{
  "train_micro_batch_size_per_gpu": $MICRO_BATCH_SIZE,
  "train_batch_size": $GLOBAL_BATCH_SIZE,
  "gradient_clipping": 1.0,
  "zero_optimization": {"stage": $ZERO_STAGE},
  "bf16": {"enabled": true},
  "steps_per_print": 100
}
EOT

python -m torch.distributed.launch --nproc_per_node $GPUS_PER_NODE --nnodes $NNODES \
    --node_rank $NODE_RANK --master_addr $MASTER_ADDR --master_port $MASTER_PORT \
    pretrain_gpt.py \
    --tensor-model-parallel-size $TP_SIZE \
    --pipeline-model-parallel-size $PP_SIZE \
    --num-layers $NLAYERS \
    --hidden-size $NHIDDEN \
    --num-attention-heads $NHEADS \
    --seq-length $SEQ_LEN \
    --max-position-embeddings $SEQ_LEN \
    --micro-batch-size $MICRO_BATCH_SIZE \
    --global-batch-size $GLOBAL_BATCH_SIZE \
    --train-samples 100_000_000 \
    --tokenizer-type PretrainedFromHF \
    --tokenizer-name-or-path $TOKENIZER_NAME_OR_PATH \
    --embed-layernorm \
    --position-embedding-type alibi \
    --bf16 \
    --checkpoint-activations \
    --data-path $DATA_PATH \
    --save $CHECKPOINT_PATH \
    --load $CHECKPOINT_PATH \
    --tensorboard-dir $TENSORBOARD_PATH \
    --deepspeed \
    --deepspeed_config $config_json \
    --zero-stage $ZERO_STAGE \
    --deepspeed-activation-checkpointing
