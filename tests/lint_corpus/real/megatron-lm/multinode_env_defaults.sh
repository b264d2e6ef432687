#!/bin/bash
# Run once per node by a cluster launcher that sets the rendezvous variables; the defaults are
# for a single node.
export CUDA_DEVICE_MAX_CONNECTIONS=1
GPUS_PER_NODE=${GPUS_PER_NODE:-8}
NNODES=${NNODES:-1}
NODE_RANK=${NODE_RANK:-0}
MASTER_ADDR=${MASTER_ADDR:-localhost}
MASTER_PORT=${MASTER_PORT:-6000}
TP=${TP:-4}
PP=${PP:-2}
MBS=${MBS:-1}
GBS=${GBS:-64}
torchrun --nproc_per_node $GPUS_PER_NODE --nnodes $NNODES --node_rank $NODE_RANK \
  --master_addr $MASTER_ADDR --master_port $MASTER_PORT pretrain_gpt.py \
  --tensor-model-parallel-size $TP --pipeline-model-parallel-size $PP \
  --num-layers 40 --hidden-size 5120 --num-attention-heads 40 --seq-length 4096 \
  --max-position-embeddings 4096 --micro-batch-size $MBS --global-batch-size $GBS \
  --train-iters 10000 --lr 3e-4 --min-lr 3e-5 --lr-decay-style cosine --lr-warmup-iters 100 --bf16 \
  --data-path data/en_text_document --tokenizer-type HuggingFaceTokenizer --tokenizer-model meta-llama/Llama-2-13b-hf
