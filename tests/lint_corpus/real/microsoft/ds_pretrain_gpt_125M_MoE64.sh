#!/bin/bash
# GPT-125M with 64 experts on microsoft's fork (DeepSpeed-MoE): experts spread over 8 ranks.
MODEL_SIZE=0.125
NUM_LAYERS=12
HIDDEN_SIZE=768
NUM_ATTN_HEADS=12
GLOBAL_BATCH_SIZE=256
MICRO_BATCH_SIZE=4
EP_SIZE=8
NUM_EXPERTS=64
MOE_LOSS_COEFF=0.01
ZERO_STAGE=0
NUM_GPUS=8

config_json="ds_config_gpt_moe.json"
cat <<EOT > $config_json
{
  "train_batch_size" : ${GLOBAL_BATCH_SIZE},
  "train_micro_batch_size_per_gpu": ${MICRO_BATCH_SIZE},
  "steps_per_print": 10,
  "zero_optimization": {"stage": ${ZERO_STAGE}},
  "gradient_clipping": 1.0,
  "prescale_gradients": false,
  "fp16": {"enabled": true, "loss_scale": 0, "loss_scale_window": 500, "hysteresis": 2,
           "min_loss_scale": 1, "initial_scale_power": 11},
  "wall_clock_breakdown" : false
}
EOT

megatron_options=" \
        --override-opt_param-scheduler \
        --adam-beta1 0.9 \
        --adam-beta2 0.95 \
        --tensor-model-parallel-size 1 \
        --moe-expert-parallel-size ${EP_SIZE} \
        --num-experts ${NUM_EXPERTS} \
        --moe-loss-coeff ${MOE_LOSS_COEFF} \
        --moe-train-capacity-factor 1.0 \
        --moe-min-capacity 4 \
        --create-moe-param-group \
        --topk 1 \
        --init-method-std 0.014 \
        --lr-decay-tokens 300000000000 \
        --lr-warmup-tokens 375000000 \
        --micro-batch-size ${MICRO_BATCH_SIZE} \
        --global-batch-size ${GLOBAL_BATCH_SIZE} \
        --num-layers ${NUM_LAYERS} \
        --hidden-size ${HIDDEN_SIZE} \
        --num-attention-heads ${NUM_ATTN_HEADS} \
        --seq-length 2048 \
        --max-position-embeddings 2048 \
        --train-tokens 300000000000 \
        --train-samples 146484375 \
        --lr 4.5e-4 \
        --min-lr 4.5e-06 \
        --lr-decay-style cosine \
        --split 98,2,0 \
        --log-interval 10 \
        --eval-interval 100 \
        --eval-iters 10 \
        --save-interval 10000 \
        --weight-decay 0.1 \
        --clip-grad 1.0 \
        --hysteresis 2 \
        --num-workers 0 \
        --fp16 \
        --vocab-file gpt2-vocab.json \
        --merge-file gpt2-merges.txt \
        --data-path data/pile_text_document"

deepspeed_options=" \
        --deepspeed \
        --deepspeed_config ${config_json} \
        --pipeline-model-parallel-size 1 \
        --no-pipeline-parallel"

run_cmd="deepspeed --num_gpus ${NUM_GPUS} pretrain_gpt.py ${megatron_options} ${deepspeed_options} 2>&1 | tee train.log"
echo ${run_cmd}
eval ${run_cmd}
