"""A Megatron argument list (the MEGATRON_ARGS=( ... ) array of megatron_args.sh) -> facts."""

from __future__ import annotations

import shlex

from generator.rules import Fact

# flag -> fact name, for flags that take an integer
_INT_FLAGS = {
    "--tensor-model-parallel-size": "tp",
    "--pipeline-model-parallel-size": "pp",
    "--context-parallel-size": "cp",
    "--ds-sequence-parallel-size": "cp",
    "--expert-model-parallel-size": "ep",
    "--moe-expert-parallel-size": "ep",
    "--expert-tensor-parallel-size": "etp",
    "--num-virtual-stages-per-pipeline-rank": "vpp",
    "--micro-batch-size": "micro_batch_size",
    "--global-batch-size": "global_batch_size",
    "--seq-length": "seq_length",
    "--max-position-embeddings": "max_position_embeddings",
    "--num-layers": "num_layers",
    "--hidden-size": "hidden_size",
    "--num-attention-heads": "num_attention_heads",
    "--num-query-groups": "num_query_groups",
    "--num-key-value-heads": "num_query_groups",
    "--num-experts": "num_experts",
    "--moe-router-topk": "moe_top_k",
    "--zero-stage": "zero_stage",
    "--train-iters": "train_iters",
    "--train-samples": "train_samples",
    "--lr-warmup-iters": "warmup_iters",
    "--lr-warmup-samples": "warmup_samples",
}
_BOOL_FLAGS = {"--sequence-parallel": "sequence_parallel",
               "--use-distributed-optimizer": "distributed_optimizer"}


def array_tokens(text: str, name: str = "MEGATRON_ARGS") -> list[tuple[str, int]]:
    """The words of the bash array ``name=( ... )`` with their line numbers."""
    tokens: list[tuple[str, int]] = []
    inside = False
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not inside:
            inside = stripped.startswith(f"{name}=(")
            stripped = stripped[len(name) + 2:] if inside else ""
        if inside:
            closing = stripped == ")" or stripped.endswith(")") and not stripped.endswith("\\)")
            body = stripped[:-1] if closing else stripped
            tokens += [(word, number) for word in shlex.split(body, comments=True)]
            if closing:
                break
    return tokens


def read_megatron_args(text: str, file: str) -> dict[str, Fact]:
    tokens = array_tokens(text)
    facts: dict[str, Fact] = {}
    for index, (word, line) in enumerate(tokens):
        source = f"{file}:{line}"
        if word in _BOOL_FLAGS:
            facts[_BOOL_FLAGS[word]] = Fact(True, source)
        elif word in ("--bf16", "--fp16"):
            facts["precision"] = Fact(word[2:], source)
        elif word in _INT_FLAGS and index + 1 < len(tokens):
            facts[_INT_FLAGS[word]] = Fact(int(tokens[index + 1][0]), source)
    for flag in ("sequence_parallel", "distributed_optimizer"):
        facts.setdefault(flag, Fact(False, f"{file}:1"))
    facts.setdefault("precision", Fact("fp32", f"{file}:1"))
    gbs = facts.get("global_batch_size")
    for samples, iters in (("train_samples", "train_iters"), ("warmup_samples", "warmup_iters")):
        if samples in facts and gbs and facts[samples].value % gbs.value == 0:
            facts.setdefault(iters, Fact(facts[samples].value // gbs.value, facts[samples].source))
    return facts
