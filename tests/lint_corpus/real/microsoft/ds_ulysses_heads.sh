#!/bin/bash
# DeepSpeed-Ulysses over 8 ranks with 12 heads: Ulysses gives every rank whole heads, so the
# heads must divide by the sequence-parallel size.
NUM_GPUS=8
SP=8
SEQ=16384
NUM_LAYERS=24
HIDDEN=1536
HEADS=12
MICRO=1
GLOBAL=4
ZERO=2

config_json="ds_config_gpt_sp${SP}.json"
cat <<EOT > $config_json
{
  "train_batch_size": $GLOBAL,
  "train_micro_batch_size_per_gpu": $MICRO,
  "steps_per_print": 10,
  "zero_optimization": {"stage": $ZERO},
  "gradient_clipping": 1.0,
  "bf16": {"enabled": true}
}
EOT

deepspeed --num_gpus $NUM_GPUS pretrain_gpt.py \
  --tensor-model-parallel-size 1 --ds-sequence-parallel-size $SP --no-pipeline-parallel \
  --num-layers $NUM_LAYERS --hidden-size $HIDDEN --num-attention-heads $HEADS \
  --seq-length $SEQ --max-position-embeddings $SEQ --micro-batch-size $MICRO \
  --global-batch-size $GLOBAL --train-iters 500 --lr 2e-4 --lr-decay-style cosine \
  --use-flash-attn-v2 --bf16 --data-path data/my_text_document \
  --vocab-file gpt2-vocab.json --merge-file gpt2-merges.txt \
  --deepspeed --deepspeed_config $config_json --zero-stage $ZERO
