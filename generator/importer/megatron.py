"""Megatron-LM / Megatron-DeepSpeed arguments -> spec values. Flags the generator renders are
mapped back to the spec fields they come from; every other word stays, in order, in
launch.extra_args. A flag given twice counts once, with its last value (argparse's rule)."""

from __future__ import annotations

import re
from fractions import Fraction

from generator.dialects import Dialect
from generator.dialects.argv import split
from generator.importer.draft import Draft, RuntimeWord, spec_word
from generator.readers.bash.evaluate import UNKNOWN
from generator.readers.launch import step_schedule
from generator.spec.fields import fields_of
from generator.spec.model import ARCHITECTURE, Model

# the spec's values for what a script leaves out, where the dialect's parser assumes them
_ASSUMED = {"precision": "training.precision", "recompute": "training.recompute"}
_KIND = {"int": int, "float": float, "str": str}
# model fields whose parser default a script gets without the flag (MoE's need experts)
_ARCHITECTURE = set(ARCHITECTURE) - set(fields_of(Model, group="moe"))


def split_arguments(words: list[str | None], d: Dialect
                    ) -> tuple[dict[str, list[str | None]], list[str | None]]:
    """({flag of the dialect's table: its values (last occurrence)}, the other words in order)."""
    return split_words(words, {e.flag: e.arity for e in d.entries})


def split_words(words: list[str | None], arities: dict[str, int]
                ) -> tuple[dict[str, list[str | None]], list[str | None]]:
    """({flag of ``arities``: its values (last occurrence)}, the other words in order). A flag
    without all its values stays with the other words (Megatron would refuse it)."""
    options, _ = split(words, arities.get)
    known: dict[str, list[str | None]] = {}
    used: set[int] = set()
    for option in options:
        arity = arities.get(option.flag)
        values = option.texts(words)
        complete = len(values) >= 1 if arity == "+" else len(values) == arity
        if arity is None or (option.inline is not None and arity != 1) or not complete:
            continue
        known[option.flag] = values
        used |= {option.index, *option.values}
    return known, [word for k, word in enumerate(words) if k not in used]


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


def framework_defaults(d: Dialect) -> dict[str, object]:
    """The training, layout and architecture values a script that leaves the flag out gets: the
    dialect parser's own defaults (catalogue), as spec values (MoE's only with experts)."""
    out: dict[str, object] = {}
    for entry in d.entries:
        option = d.catalogue.get(entry.flag)
        if not entry.spec or not entry.spec.startswith(("training.", "parallelism.", "model.")) \
                or entry.spec.startswith("model.") and entry.value not in _ARCHITECTURE or entry.implied \
                or option is None \
                or option.default is None or entry.switch:
            continue
        value = entry.meaning([str(option.default)]) if entry.map else option.default
        if entry.spec_map and value is not None:
            value = entry.spec_map.get(value, value)
        if value is not None and not (isinstance(value, int | float) and value < 0):  # -1: unset
            out.setdefault(entry.spec, value)
    for name, path in _ASSUMED.items():
        if name in d.defaults:
            out[path] = d.defaults[name]
    return out


def read_megatron(words: list[str | None], draft: Draft, d: Dialect) -> list[str | None]:
    """Spec values from the entry point's arguments, read with the dialect's table (flags the
    table writes map back to their spec fields); returns the words left for extra_args."""
    known, extra = split_arguments(words, d)
    for path, value in framework_defaults(d).items():
        draft.set(path, value)
    read_entries(known, draft, d, extra)
    if "--adam-beta1" in known or "--adam-beta2" in known:
        set_adam_betas(draft, flag_value(known, "--adam-beta1", float),
                       flag_value(known, "--adam-beta2", float))
    _implied(known, draft, d)
    _load(known, draft)
    _rope_scaling(known, draft)
    _moe_layer_freq(known, draft, extra)
    _window(known, draft)
    _vpp(known, draft)
    _schedule(known, draft)
    _batch_changes(known, draft, d)
    return extra


def read_entries(known: dict, draft: Draft, d: Dialect, extra: list) -> None:
    """The spec fields a dialect's table maps the known flags to (its walk backward)."""
    for entry in d.entries:
        if entry.same_as is not None and entry.spec is not None:
            _same_as(entry, known, draft, d)
        if entry.flag not in known or entry.spec is None or entry.implied or entry.same_as:
            continue
        words_ = known[entry.flag]
        if entry.nargs == "+":
            draft.set(entry.spec, _blend(words_))
        elif entry.type == "str" and isinstance(words_[0], RuntimeWord):  # ${NAME}/... at run time
            draft.set(entry.spec, spec_word(words_[0]))
        elif entry.type in _KIND:
            got = flag_value(known, entry.flag, _KIND[entry.type])
            if got is None:
                draft.unknown(entry.spec, f"{entry.flag} is {_shown(words_[0])}, not known before run time")
            else:
                draft.set(entry.spec, got)
        elif entry.map is not None:
            texts = [w or "" for w in words_]
            meaning = entry.meaning(texts)
            if meaning is None and any(o is not entry and o.flag == entry.flag and o.map is not None
                                       and o.meaning(texts) is not None for o in d.entries):
                continue  # another entry of the flag reads it (MindSpeed's tokenizer names)
            if meaning is None:
                draft.notes.append(f"{entry.flag} {_shown(words_[0])} has no spec equivalent; "
                                   "kept in extra_args")
                extra += [entry.flag, *words_]
            else:
                if meaning in entry.map and words_[0] != entry.map[meaning]:  # another spelling
                    draft.marks[entry.spec] = (f"the files give {entry.flag} {words_[0]}; {entry.spec} "
                                               f"{meaning} renders {entry.flag} {entry.map[meaning]}")
                if entry.spec_map:
                    meaning = entry.spec_map.get(meaning, meaning)
                draft.set(entry.spec, entry.spec_value if entry.spec_value is not None else meaning)
        else:
            draft.set(entry.spec, entry.spec_value if entry.spec_value is not None else entry.when)


def _blend(words: list[str | None]) -> list:
    """--data-path's words as data.paths: prefixes, or {path, weight} pairs of a blend."""
    weights = [parse_value(w, float) for w in words[::2]]
    if len(words) % 2 == 0 and all(w is not None for w in weights):
        return [{"path": spec_word(path), "weight": w} for w, path in zip(weights, words[1::2], strict=True)]
    return [spec_word(w) for w in words]


def _load(known: dict, draft: Draft) -> None:
    """--load: with --finetune the weights a fine-tune starts from; otherwise the folder a run
    resumes from, which the spec keeps one with --save (checkpoint.dir)."""
    if "--load" not in known:
        return
    (load,) = known["--load"]
    value = spec_word(load)
    if "--finetune" in known:
        draft.set("checkpoint.finetune_from", value)
    elif "--save" not in known:
        draft.set("checkpoint.dir", value)
    elif known["--save"] != known["--load"]:
        def text(word):
            return word.shell if isinstance(word, RuntimeWord) else _shown(word)

        draft.marks["checkpoint.dir"] = (f"the files resume from --load {text(load)} and save to "
                                         f"--save {text(known['--save'][0])}; the spec resumes from "
                                         "where it saves")


def _same_as(entry, known: dict, draft: Draft, d: Dialect) -> None:
    """A switch that makes its value equal another (microsoft's --enable-expert-tensor-parallelism:
    expert tp = tp); absent, the value is the dialect's default (expert tp 1), for MoE models."""
    if entry.flag in known:
        source = next(e.spec for e in d.entries if e.value == entry.same_as and e.spec)
        draft.set(entry.spec, draft.get(source) or 1)
    elif entry.value in d.defaults and draft.get("model.num_experts"):
        draft.set(entry.spec, d.defaults[entry.value])


def _implied(known: dict, draft: Draft, d: Dialect) -> None:
    """Flags the dialect writes along with another (full recompute's method, FP8's recipe, the
    packing trio): a script that gives other values, or leaves some out, is marked."""
    primary = {e.value: e for e in d.entries if e.spec and not e.implied}
    for entry in d.entries:
        if not entry.implied or entry.value not in primary:
            continue
        owner = primary[entry.value]
        value = draft.get(owner.spec)
        if owner.spec_value is not None or value is None:
            continue
        wanted = entry.spelled(True if entry.switch and entry.when is True else value)
        if wanted is None:
            continue
        given = known.get(entry.flag)
        if given is None and not (entry.switch and any(e.flag in known for e in d.entries
                                                       if e.value == entry.value and e is not entry)):
            continue
        if given is None or list(given) != wanted:
            shown = f"{entry.flag} {' '.join(w or '?' for w in given)}" if given else f"no {entry.flag}"
            draft.marks[owner.spec] = (f"the files give {shown}; {owner.spec} {value} renders "
                                       f"{' '.join([entry.flag, *wanted])}")


_YARN_FLAGS = (("--mscale", "mscale", float), ("--mscale-all-dim", "mscale_all_dim", float),
               ("--yarn-original-max-position-embeddings", "original_max_position_embeddings", int),
               ("--yarn-beta-fast", "beta_fast", float), ("--yarn-beta-slow", "beta_slow", float))
# --moe-layer-freq as the tables write it (and NVIDIA's recipes, without the parentheses): k dense
# layers, then MoE layers
_DENSE_FIRST = re.compile(r"^\(?\[0\]\*(\d+)\+\[1\]\*\(?(\d+)\)?\)?$")


def _moe_layer_freq(known: dict, draft: Draft, extra: list) -> None:
    """--moe-layer-freq: 1 (every layer MoE) or k dense layers first (model.moe_dense_layers);
    another pattern has no spec field and stays in extra_args."""
    words = known.get("--moe-layer-freq")
    if not words:
        return
    text = (words[0] or "").replace(" ", "")
    match = _DENSE_FIRST.match(text)
    if text == "1":
        draft.set("model.moe_dense_layers", 0)
    elif match and draft.get("model.num_layers") in (None, int(match[1]) + int(match[2])):
        draft.set("model.moe_dense_layers", int(match[1]))
    else:
        draft.notes.append(f"--moe-layer-freq {_shown(words[0])} is not dense-first layers; kept in "
                           "extra_args")
        extra += ["--moe-layer-freq", *words]


def _window(known: dict, draft: Draft) -> None:
    """--window-size "left,right" (Megatron's tuple_type, parentheses allowed) as the spec's pair."""
    text = (known.get("--window-size") or [None])[0]
    if text is None:
        return
    parts = text.strip("()").split(",")
    try:
        pair = [int(p) for p in parts]
    except ValueError:
        pair = []
    if len(pair) == 2:
        draft.set("model.window_size", pair)
    else:
        draft.unknown("model.window_size", f"--window-size is {_shown(text)}, not a pair of token counts")


def _rope_scaling(known: dict, draft: Draft) -> None:
    """Megatron-LM's Llama-3.1 scaling: --use-rope-scaling with its factor (default 8; the
    other frequencies are fixed); YaRN: MLA's (--rope-type yarn, its default, with
    --rotary-scaling-factor) or the yarn positions' (--position-embedding-type yarn), with the
    factor and attention scales, and for the latter the correction bounds and their rounding."""
    if "--use-rope-scaling" in known:
        draft.set("model.rope_scaling", {"factor": flag_value(known, "--rope-scaling-factor", float) or 8.0})
        return
    mla = "--multi-latent-attention" in known
    positions = (known.get("--position-embedding-type") or [None])[0]
    rope_type = (known.get("--rope-type") or [None])[0]
    if not (positions == "yarn" or mla and (rope_type == "yarn" or rope_type is None
                                            and "--rotary-scaling-factor" in known)):
        return
    block: dict[str, object] = {"type": "yarn",
                                "factor": flag_value(known, "--rotary-scaling-factor", float) or 1.0}
    for flag, key, kind in _YARN_FLAGS:
        given = flag_value(known, flag, kind)
        if given is not None:
            block[key] = given
    if "--no-yarn-correction-range-round-to-int" in known:
        block["truncate"] = False
    draft.set("model.rope_scaling", block)


def _vpp(known: dict, draft: Draft) -> None:
    per_virtual = flag_value(known, "--num-layers-per-virtual-pipeline-stage", int)
    layers, pp = draft.get("model.num_layers"), draft.get("parallelism.pp", 1)
    if per_virtual and layers and pp and layers % pp == 0 and (layers // pp) % per_virtual == 0:
        draft.set("parallelism.vpp", layers // pp // per_virtual)


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


def _batch_changes(known: dict, draft: Draft, d: Dialect) -> None:
    ramp = [parse_value(v, int) for v in known.get("--rampup-batch-size", [])]
    rampup = d.capabilities.get("rampup")
    if ramp and None not in ramp:
        draft.set("batch.rampup", {"start": ramp[0], "increment": ramp[1], "samples": ramp[2]})
        if isinstance(rampup, dict):  # a release range: the last release that applies it
            draft.set("megatron.version", rampup["until"])
    if "--step-batch-size-schedule" in known:
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
