#!/bin/bash
# A Megatron-LM (NVIDIA) run written with BigScience habits: --checkpoint-activations is the
# old spelling, which current Megatron-LM refuses at start-up (use --recompute-activations);
# nothing else in the script says Megatron-LM rather than a Megatron-DeepSpeed fork, where the
# flag is fine, so it is a warning naming both.
export CUDA_DEVICE_MAX_CONNECTIONS=1
GPUS_PER_NODE=8
DISTRIBUTED_ARGS="--nproc_per_node $GPUS_PER_NODE --nnodes 1 --master_addr localhost --master_port 6000"

GPT_ARGS="--tensor-model-parallel-size 2 --pipeline-model-parallel-size 1 \
  --num-layers 24 --hidden-size 2048 --num-attention-heads 16 --seq-length 2048 \
  --max-position-embeddings 2048 --micro-batch-size 4 --global-batch-size 64 \
  --train-iters 10000 --lr 3e-4 --min-lr 3e-5 --lr-decay-style cosine --lr-warmup-iters 200 \
  --bf16 --checkpoint-activations"

torchrun $DISTRIBUTED_ARGS pretrain_gpt.py $GPT_ARGS --data-path data/my_text_document \
  --vocab-file gpt2-vocab.json --merge-file gpt2-merges.txt --split 949,50,1
