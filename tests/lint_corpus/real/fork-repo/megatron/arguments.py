"""The argument parser of a made-up Megatron fork, written for gen-launch's tests: upstream's
options plus the fork's own (a block-wise pipeline split, the old --data-impl, flash attention
as a switch its model code reads)."""

import argparse


def parse_args(extra_args_provider=None, ignore_unknown_args=False):
    parser = argparse.ArgumentParser(description="Fork arguments", allow_abbrev=False)
    parser = _model(parser)
    parser = _training(parser)
    parser = _parallel(parser)
    parser = _data(parser)
    if extra_args_provider is not None:
        parser = extra_args_provider(parser)
    if ignore_unknown_args:
        args, _ = parser.parse_known_args()
    else:
        args = parser.parse_args()
    return args


def _model(parser):
    group = parser.add_argument_group(title="model")
    group.add_argument("--num-layers", type=int, default=None)
    group.add_argument("--hidden-size", type=int, default=None)
    group.add_argument("--ffn-hidden-size", type=int, default=None)
    group.add_argument("--num-attention-heads", type=int, default=None)
    group.add_argument("--seq-length", type=int, default=None)
    group.add_argument("--max-position-embeddings", type=int, default=None)
    group.add_argument("--position-embedding-type", type=str, default="learned_absolute",
                       choices=["learned_absolute", "rope", "alibi"])
    group.add_argument("--use-flash-attn", action="store_true")
    group.add_argument("--bf16", action="store_true")
    return parser


def _training(parser):
    group = parser.add_argument_group(title="training")
    group.add_argument("--micro-batch-size", type=int, default=None)
    group.add_argument("--global-batch-size", type=int, default=None)
    group.add_argument("--train-iters", type=int, default=None)
    group.add_argument("--lr", type=float, default=None)
    group.add_argument("--log-batch-size-to-tensorboard", action="store_true")
    return parser


def _parallel(parser):
    group = parser.add_argument_group(title="parallel")
    group.add_argument("--tensor-model-parallel-size", type=int, default=1)
    group.add_argument("--pipeline-model-parallel-size", type=int, default=1)
    group.add_argument("--pipeline-model-parallel-method", type=str, default="uniform",
                       choices=["uniform", "block"])
    group.add_argument("--pipeline-model-parallel-blocks", type=str, default=None,
                       help="Comma-separated layers per stage with --pipeline-model-parallel-method block.")
    group.add_argument("--sequence-parallel", action="store_true")
    return parser


def _data(parser):
    group = parser.add_argument_group(title="data")
    group.add_argument("--data-path", nargs="*", default=None)
    group.add_argument("--data-impl", type=str, default="infer", choices=["lazy", "cached", "mmap", "infer"])
    group.add_argument("--valid-num-workers", type=int, default=2)
    return parser
