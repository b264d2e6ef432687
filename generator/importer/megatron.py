"""Megatron-LM / Megatron-DeepSpeed arguments -> spec values. Flags the generator renders are
mapped back to the spec fields they come from; every other word stays, in order, in
launch.extra_args. A flag given twice counts once, with its last value (argparse's rule)."""

from __future__ import annotations

from fractions import Fraction

from generator.importer.draft import Draft
from generator.readers.bash.evaluate import UNKNOWN

# flag -> (spec path, type); each takes one value
_VALUES = {
    "--num-layers": ("model.num_layers", int), "--hidden-size": ("model.hidden_size", int),
    "--ffn-hidden-size": ("model.ffn_hidden_size", int),
    "--num-attention-heads": ("model.num_attention_heads", int),
    "--num-query-groups": ("model.num_query_groups", int),
    "--num-key-value-heads": ("model.num_query_groups", int),
    "--seq-length": ("model.seq_length", int),
    "--max-position-embeddings": ("model.max_position_embeddings", int),
    "--vocab-size": ("model.vocab_size", int),
    "--num-experts": ("model.num_experts", int), "--moe-router-topk": ("model.moe_top_k", int),
    "--tensor-model-parallel-size": ("parallelism.tp", int),
    "--pipeline-model-parallel-size": ("parallelism.pp", int),
    "--context-parallel-size": ("parallelism.cp", int),
    "--ds-sequence-parallel-size": ("parallelism.cp", int),
    "--expert-model-parallel-size": ("parallelism.ep", int),
    "--moe-expert-parallel-size": ("parallelism.ep", int),
    "--expert-tensor-parallel-size": ("parallelism.etp", int),
    "--num-virtual-stages-per-pipeline-rank": ("parallelism.vpp", int),
    "--decoder-first-pipeline-num-layers": ("parallelism.first_stage_layers", int),
    "--decoder-last-pipeline-num-layers": ("parallelism.last_stage_layers", int),
    "--zero-stage": ("parallelism.zero_stage", int),
    "--micro-batch-size": ("batch.micro_batch_size", int),
    "--global-batch-size": ("batch.global_batch_size", int),
    "--train-iters": ("training.train_iters", int), "--train-samples": ("training.train_samples", int),
    "--lr": ("training.lr", float), "--min-lr": ("training.min_lr", float),
    "--weight-decay": ("training.weight_decay", float), "--adam-eps": ("training.adam_eps", float),
    "--clip-grad": ("training.gradient_clipping", float), "--seed": ("training.seed", int),
    "--log-interval": ("training.log_interval", int),
}
# flag -> (spec path, {value written: spec value})
_CHOICES = {
    "--position-embedding-type": ("model.position_embedding", {
        "learned_absolute": "learned_absolute", "absolute": "learned_absolute", "rope": "rope",
        "rotary": "rope", "alibi": "alibi", "none": "none"}),
    "--normalization": ("model.normalization", {"RMSNorm": "rmsnorm", "rmsnorm": "rmsnorm",
                                                "LayerNorm": "layernorm", "layernorm": "layernorm"}),
    "--lr-decay-style": ("training.decay", {"cosine": "cosine", "linear": "linear",
                                            "constant": "constant", "WSD": "wsd"}),
    "--recompute-granularity": ("training.recompute", {"full": "full", "selective": "selective"}),
}
# switch -> (spec path, value it sets); None: implied by other values
_SWITCHES = {
    "--sequence-parallel": ("parallelism.sequence_parallel", True),
    "--use-distributed-optimizer": ("parallelism.distributed_optimizer", True),
    "--swiglu": ("model.activation", "swiglu"),
    "--untie-embeddings-and-output-weights": ("model.tie_embeddings", False),
    "--use-rotary-position-embeddings": ("model.position_embedding", "rope"),
    "--bf16": ("training.precision", "bf16"), "--fp16": ("training.precision", "fp16"),
    "--recompute-activations": ("training.recompute", "selective"),
    "--group-query-attention": None, "--deepspeed": None,
}
_PACKING = ("--reset-position-ids", "--reset-attention-mask", "--eod-mask-loss")
# MindSpeed-LLM's switches the generator renders on Ascend (templates/megatron_args.sh.j2)
MINDSPEED = ("--use-mcore-models", "--use-flash-attn", "--use-fused-rmsnorm", "--use-fused-swiglu",
             "--use-fused-rotary-pos-emb", "--no-masked-softmax-fusion")
# read below, with the other values in view
_OTHERS = {"--adam-beta1": 1, "--adam-beta2": 1, "--lr-warmup-iters": 1, "--lr-warmup-samples": 1,
           "--lr-warmup-fraction": 1, "--lr-decay-iters": 1, "--lr-decay-samples": 1,
           "--lr-wsd-decay-style": 1, "--lr-wsd-decay-iters": 1, "--lr-wsd-decay-samples": 1,
           "--recompute-method": 1, "--recompute-num-layers": 1, "--rampup-batch-size": 3,
           "--step-batch-size-schedule": 1, "--deepspeed_config": 1, "--deepspeed-config": 1,
           "--num-layers-per-virtual-pipeline-stage": 1, "--fp8-format": 1,
           "--fp8-amax-history-len": 1, "--fp8-amax-compute-algo": 1, "--fp8-param-gather": 0}
# the FP8 settings the generator renders for precision fp8 (templates/megatron_args.sh.j2)
_FP8 = {"--fp8-format": "hybrid", "--fp8-amax-history-len": "1024", "--fp8-amax-compute-algo": "max"}
_ARITY = {**dict.fromkeys(_VALUES, 1), **dict.fromkeys(_CHOICES, 1), **dict.fromkeys(_SWITCHES, 0),
          **dict.fromkeys(_PACKING, 0), **_OTHERS}

# Megatron's own defaults for what a hand-written script leaves out (arguments.py), where
# they differ from the spec's defaults.
_MEGATRON_DEFAULTS = {"training.decay": "linear", "training.log_interval": 100,
                      "training.precision": "fp32", "training.recompute": "none",
                      "training.adam_betas": [0.9, 0.999]}


def split_arguments(words: list[str | None], ascend: bool = False
                    ) -> tuple[dict[str, list[str | None]], list[str | None]]:
    """({known Megatron flag: its values (last occurrence)}, the other words in order)."""
    return split_words(words, {**_ARITY, **dict.fromkeys(MINDSPEED, 0)} if ascend else _ARITY)


def split_words(words: list[str | None], arities: dict[str, int]
                ) -> tuple[dict[str, list[str | None]], list[str | None]]:
    """({flag of ``arities``: its values (last occurrence)}, the other words in order)."""
    known: dict[str, list[str | None]] = {}
    extra: list[str | None] = []
    k = 0
    while k < len(words):
        word = words[k] or ""
        name, eq, inline = word.partition("=")
        arity = arities.get(name)
        if arity is None or (eq and arity != 1):
            extra.append(words[k])
            k += 1
            continue
        values = [inline] if eq else list(words[k + 1:k + 1 + arity])
        if len(values) < arity or any((v or "").startswith("--") for v in values):
            extra.append(words[k])  # a value flag without its value: Megatron would refuse it
            k += 1
            continue
        known[name] = values
        k += 1 + (0 if eq else arity)
    return known, extra


def parse_value(text: str | None, kind: type):
    """A flag's text as ``kind`` (None when it is known only at run time or does not parse)."""
    if text is None or UNKNOWN in text:
        return None
    try:
        return kind(text.replace("_", "")) if kind is int else kind(text)
    except ValueError:
        return None


def flag_value(known: dict[str, list[str | None]], flag: str, kind: type = int):
    """The parsed value of a flag split_words found (None: absent, or not known before run time)."""
    return parse_value(known[flag][0], kind) if flag in known else None


def set_adam_betas(draft: Draft, beta1: float | None, beta2: float | None) -> None:
    """Both betas when a script gives one or both; the other at the shared default (0.9, 0.999)."""
    draft.set("training.adam_betas", [0.9 if beta1 is None else beta1,
                                      0.999 if beta2 is None else beta2])


def read_megatron(words: list[str | None], draft: Draft, ascend: bool = False) -> list[str | None]:
    """Spec values from the entry point's arguments (on Ascend, MindSpeed's kernel switches are
    the generator's own); returns the words left for extra_args."""
    known, extra = split_arguments(words, ascend)
    if ascend:  # MindSpeed's NPU flash attention is a switch
        draft.set("training.flash_attention", "--use-flash-attn" in known)
    for path, value in _MEGATRON_DEFAULTS.items():
        draft.set(path, value)

    for flag, (path, kind) in _VALUES.items():
        if flag in known:
            got = flag_value(known, flag, kind)
            if got is None:
                draft.unknown(path, f"{flag} is {_shown(known[flag][0])}, not known before run time")
            else:
                draft.set(path, got)
    for flag, (path, choices) in _CHOICES.items():
        if flag in known:
            text = known[flag][0] or ""
            if text in choices:
                draft.set(path, choices[text])
            else:
                draft.notes.append(f"{flag} {_shown(text)} has no spec equivalent; kept in extra_args")
                extra += [flag, known[flag][0]]
    for flag, target in _SWITCHES.items():
        if flag in known and target is not None:
            draft.set(*target)
    if "--adam-beta1" in known or "--adam-beta2" in known:
        set_adam_betas(draft, flag_value(known, "--adam-beta1", float),
                       flag_value(known, "--adam-beta2", float))
    if "--fp8-format" in known:
        draft.set("training.precision", "fp8")
        differ = [f"{flag} {known[flag][0]}" for flag, rendered in _FP8.items()
                  if flag in known and known[flag][0] != rendered]
        if differ:
            draft.marks["training.precision"] = (f"the files use {', '.join(differ)}; precision fp8 "
                                                 f"renders {' '.join(f'{k} {v}' for k, v in _FP8.items())}")
    packing = [flag for flag in _PACKING if flag in known]
    if packing:
        draft.set("data.packing", True)
        if len(packing) < len(_PACKING):
            draft.marks["data.packing"] = (f"the files give only {', '.join(packing)}; packing renders "
                                           f"all of {', '.join(_PACKING)}")
    _vpp(known, draft)
    _recompute(known, draft)
    _schedule(known, draft)
    _batch_changes(known, draft)
    return extra


def _vpp(known: dict, draft: Draft) -> None:
    per_virtual = flag_value(known, "--num-layers-per-virtual-pipeline-stage", int)
    layers, pp = draft.get("model.num_layers"), draft.get("parallelism.pp", 1)
    if per_virtual and layers and pp and layers % pp == 0 and (layers // pp) % per_virtual == 0:
        draft.set("parallelism.vpp", layers // pp // per_virtual)


def _recompute(known: dict, draft: Draft) -> None:
    if draft.get("training.recompute") != "full":
        return
    method = (known.get("--recompute-method") or ["uniform"])[0]
    layers = (known.get("--recompute-num-layers") or ["1"])[0]
    if (method, layers) != ("uniform", "1"):
        draft.marks["training.recompute"] = (f"the files recompute with --recompute-method {method} "
                                             f"--recompute-num-layers {layers}; the spec's full "
                                             "recompute renders uniform, 1 layer")


def _schedule(known: dict, draft: Draft) -> None:
    """Warmup in the unit Megatron was given; WSD's decay phase as a fraction of the run."""
    for flag, unit in (("--lr-warmup-iters", "iters"), ("--lr-warmup-samples", "samples")):
        amount = flag_value(known, flag, int)
        if amount is not None:
            draft.set("training.warmup", {unit: amount} if amount else 0)
    fraction = flag_value(known, "--lr-warmup-fraction", float)
    if fraction is not None:
        draft.set("training.warmup", fraction)
    if "training.warmup" not in draft.values:
        draft.set("training.warmup", 0)
    run = draft.get("training.train_iters") or draft.get("training.train_samples")
    for flag in ("--lr-decay-iters", "--lr-decay-samples"):
        decay = flag_value(known, flag, int)
        if decay is not None and run is not None and decay != run:
            draft.notes.append(f"{flag} {decay} differs from the run length {run}; the spec decays "
                               "over the whole run")
    for flag in ("--lr-wsd-decay-iters", "--lr-wsd-decay-samples"):
        decay = flag_value(known, flag, int)
        if decay is not None and run:
            draft.set("training.wsd_decay", shortest_fraction(decay, run))


def shortest_fraction(count: int, total: int) -> float:
    """The decimal with the fewest digits that the plan rounds back to ``count`` of ``total``
    (it takes the nearest whole step of fraction × total): 1431 of 9537 -> 0.15."""
    for digits in range(1, 16):
        candidate = round(count / total, digits)
        if int(Fraction(repr(candidate)) * total + Fraction(1, 2)) == count:
            return candidate
    return count / total


def _batch_changes(known: dict, draft: Draft) -> None:
    ramp = [parse_value(v, int) for v in known.get("--rampup-batch-size", [])]
    if ramp and None not in ramp:
        draft.set("batch.rampup", {"start": ramp[0], "increment": ramp[1], "samples": ramp[2]})
        draft.set("megatron.version", "core_v0.17")  # the last release that applies it
    if "--step-batch-size-schedule" in known:
        from generator.readers.launch import step_schedule

        entries = step_schedule(known["--step-batch-size-schedule"][0] or "")
        if entries is None:
            draft.unknown("batch.schedule", "--step-batch-size-schedule is not known before run time",
                          [])
        else:
            draft.set("batch.schedule", [{"tokens": t, "global_batch_size": g} for t, g in entries])
            draft.set("megatron.version", "latest")
        draft.values.pop("batch.global_batch_size", None)


def _shown(text: str | None) -> str:
    return repr((text or "").replace(UNKNOWN, "…"))
