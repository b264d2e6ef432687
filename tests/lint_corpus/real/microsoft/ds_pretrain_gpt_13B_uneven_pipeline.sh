#!/bin/bash
# GPT-13B on microsoft/Megatron-DeepSpeed with 4 pipeline stages. The first stage was given
# fewer layers with Megatron-LM's --decoder-first-pipeline-num-layers, which DeepSpeed's
# pipeline engine (it partitions the layers itself) does not have.
DIR=`pwd`
DATETIME=`date +'date_%y-%m-%d_time_%H-%M-%S'`
mkdir -p $DIR/logs

DATASET_1="/vc_data/Megatron-LM/data/indexed_datasets/megatron"
DATASET="1 ${DATASET_1}"
VOCAB_PATH=/data/gpt2-vocab.json
MERGE_PATH=/data/gpt2-merges.txt

NLAYERS=40
HIDDEN=5120
HEADS=40
SEQ=2048

TP=2
PP=4
MICRO_BATCH=1
GLOBAL_BATCH=1024
ZERO_STAGE=1
NUM_NODES=8
NUM_GPUS=$((NUM_NODES * 8))

config_json="./ds_config_gpt_13B.json"
cat <<EOT > $config_json
{
  "train_batch_size": $GLOBAL_BATCH,
  "train_micro_batch_size_per_gpu": $MICRO_BATCH,
  "steps_per_print": 10,
  "zero_optimization": {
    "stage": $ZERO_STAGE
  },
  "gradient_clipping": 1.0,
  "prescale_gradients": false,
  "fp16": {
    "enabled": true,
    "loss_scale": 0,
    "loss_scale_window": 500,
    "hysteresis": 2,
    "min_loss_scale": 1,
    "initial_scale_power": 12
  },
  "wall_clock_breakdown": false
}
EOT

ds_args=""
ds_args=" --deepspeed ${ds_args}"
ds_args=" --deepspeed_config=$config_json ${ds_args}"
ds_args=" --zero-stage=$ZERO_STAGE ${ds_args}"
ds_args=" --deepspeed-activation-checkpointing ${ds_args}"

deepspeed --num_nodes ${NUM_NODES} --num_gpus 8 pretrain_gpt.py \
    --tensor-model-parallel-size $TP \
    --pipeline-model-parallel-size $PP \
    --decoder-first-pipeline-num-layers 7 \
    --num-layers $NLAYERS \
    --hidden-size $HIDDEN \
    --num-attention-heads $HEADS \
    --seq-length $SEQ \
    --max-position-embeddings $SEQ \
    --micro-batch-size $MICRO_BATCH \
    --global-batch-size $GLOBAL_BATCH \
    --train-iters 100000 \
    --lr 1.0e-4 \
    --min-lr 1.0e-6 \
    --lr-decay-style cosine \
    --lr-warmup-iters 2000 \
    --weight-decay 0.1 \
    --clip-grad 1.0 \
    --log-interval 10 \
    --save-interval 1000 \
    --eval-interval 1000 \
    --eval-iters 10 \
    --fp16 \
    --data-path $DATASET \
    --vocab-file $VOCAB_PATH \
    --merge-file $MERGE_PATH \
    --split 98,2,0 \
    --tensorboard-dir $DIR/logs/tensorboard-$DATETIME \
    $ds_args 2>&1 | tee $DIR/logs/gpt13b-$DATETIME.log
