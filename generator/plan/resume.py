"""What a resume changes: every plan.json value that differs between two runs, classified by
what it means for loading OLD's checkpoint in NEW, in order of severity:

- ``safe``: NEW loads OLD's checkpoint as it is (a note says what changes for the run);
- ``flags``: it loads once the scheduler is told whose schedule to follow (checkpoint.schedule);
- ``convert``: the checkpoint must be converted first (Megatron's torch_dist resharding needs
  a reshardable optimizer state; DeepSpeed needs a universal checkpoint), and how;
- ``cannot``: no checkpoint of OLD's can become NEW's (another model, another framework, no
  checkpoint at all), or the arguments as written make the framework refuse it.

What each framework checks on load is read from its own code (the oracle tests run it):
Megatron's ``check_checkpoint_args`` (sizes, tokenizer, parallel sizes of torch-format
checkpoints), the distributed optimizer's sharding types, ``OptimizerParamScheduler`` (or the
BLOOM fork's ``AnnealingLR``) comparing its values with the checkpoint's, DeepSpeed's ZeRO
partitions per data-parallel rank.

Used by ``gen-launch resume-check`` (generator/resume.py) and by the stages of one spec (GL313,
generator/run.py); it reads records only, so it sits in plan/, below both.
"""

from __future__ import annotations

import json
from typing import Any

from generator.dialects import dialect
from generator.frameworks import Framework, framework_of
from generator.spec.fields import fields_of
from generator.spec.model import Model
from generator.values import value

SEVERITY = ("safe", "flags", "convert", "cannot")
# the model fields by what another value means (their ``resume`` metadata): SHAPE, parameter
# shapes and what the weights compute (another model); BEHAVIOUR, the same weights used otherwise
# from the resumed step on; the others have rules of their own below (seq_length,
# max_position_embeddings, the padded vocabulary) or do not matter to a resume
SHAPE = fields_of(Model, resume="weights")
BEHAVIOUR = fields_of(Model, resume="behaviour")
# how the weights and optimizer state are split over the ranks
LAYOUT = ("tp", "pp", "vpp", "ep", "etp", "first_stage_layers", "last_stage_layers")
# what Megatron's scheduler compares with the checkpoint's (a dialect's capabilities may say
# fewer: scheduler_checked)
SCHEDULE = ("lr", "min_lr", "warmup_steps", "decay_steps", "decay_style", "wsd_decay_steps",
            "weight_decay", "weight_decay_steps")
# tokenizers that read a vocab file: Megatron then also compares these with the checkpoint's
VOCAB_FILE_TOKENIZERS = ("GPT2BPETokenizer", "BertWordPieceLowerCase", "BertWordPieceCase")
UNIVERSAL = ("python -m deepspeed.checkpoint.ds_to_universal --input_folder {dir}/global_stepN "
             "--output_folder {dir}/global_stepN_universal (it writes {dir}/latest_universal), then "
             "set checkpoint.universal: true in NEW")


@value
class Change:
    """One plan value that differs between two runs, and what it means for a resume."""

    field: str  # where it is in plan.json (parallelism.tp)
    old: Any
    new: Any
    verdict: str  # one of SEVERITY
    why: str
    fix: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"field": self.field, "old": self.old, "new": self.new, "verdict": self.verdict,
                "why": self.why, "fix": self.fix or None}


def shown(value: Any) -> str:
    """A plan.json value as the report shows it (a run-time word as the spec wrote it)."""
    if isinstance(value, dict) and set(value) == {"shell"}:
        return value["shell"]
    return json.dumps(value) if isinstance(value, dict | list) else str(value)


def _at(record: dict[str, Any], dotted: str) -> Any:
    value: Any = record
    for key in dotted.split("."):
        value = value.get(key) if isinstance(value, dict) else None
    return value


def _dialect(record: dict[str, Any]) -> str:
    return (record.get("dialect") or {}).get("name") or record["framework"]


def _capability(record: dict[str, Any], name: str, default: Any) -> Any:
    """A capability of the run's Megatron dialect (its table), ``default`` without one."""
    found = (record.get("dialect") or {}).get("name")
    return default if found is None else dialect(found).capabilities.get(name, default)


def _framework(record: dict[str, Any]) -> Framework:
    return framework_of(record["framework"])


def changes(old: dict[str, Any], new: dict[str, Any]) -> list[Change]:
    """Every change between two run records that a checkpoint depends on, classified."""
    out: list[Change] = []
    where = _loads(old, new, out)
    if old["framework"] != new["framework"] or _dialect(old) != _dialect(new):
        out.append(Change("framework", _dialect(old), _dialect(new), "cannot",
                          "the frameworks write their checkpoints in layouts of their own (Megatron's "
                          "torch_dist or per-rank files, DeepSpeed's engine files, FSDP's "
                          "torch.distributed.checkpoint shards)",
                          "keep the framework; to start NEW from OLD's weights, convert them through the "
                          "Hugging Face format and set checkpoint.finetune_from (weights only)"))
        return out
    weights_only = where == "finetune"
    _model(old, new, out)
    _tokenizer(old, new, out)
    _layout(old, new, out, weights_only)
    if not weights_only:
        _batch(old, new, out)
        _schedule(old, new, out)
    _release(old, new, out)
    return out


def _loads(old, new, out: list[Change]) -> str | None:
    """Whether NEW loads what OLD saves: resumes checkpoint.dir, or takes its weights only
    (checkpoint.finetune_from); None when it loads neither."""
    saved, resumed = _at(old, "checkpoint.dir"), _at(new, "checkpoint.dir")
    finetune = _at(new, "checkpoint.finetune_from")
    if saved is None and resumed is None and not _framework(old).megatron_arguments:
        out.append(Change("checkpoint.dir", None, None, "safe",
                          "no checkpoint.dir: the entry point saves where its own arguments say "
                          "(launch.extra_args); resume-check takes it that NEW resumes there"))
        return "resume"
    if saved is None:
        out.append(Change("checkpoint.dir", None, resumed, "cannot", "OLD saves no checkpoint",
                          "give OLD a checkpoint.dir (and checkpoint.interval) before it runs"))
        return None
    if finetune is not None:
        if finetune != saved:
            out.append(Change("checkpoint.finetune_from", saved, finetune, "cannot",
                              "NEW starts from other weights than the ones OLD saves",
                              f"set checkpoint.finetune_from: {shown(saved)}"))
            return None
        out.append(Change("checkpoint.finetune_from", None, finetune, "safe",
                          "NEW takes OLD's weights only (--finetune: no optimizer state, no RNG state, "
                          "from step 0 and sample 0); the layout and batch may change freely where the "
                          "format reshards"))
        return "finetune"
    if resumed != saved:
        out.append(Change("checkpoint.dir", saved, resumed, "cannot",
                          "NEW resumes from another folder than the one OLD saves to (--load is "
                          "checkpoint.dir); it would start from scratch",
                          f"set checkpoint.dir: {shown(saved)} in NEW (or copy the checkpoint there)"))
        return None
    return "resume"


def _model(old, new, out: list[Change]) -> None:
    mo, mn = old["model"], new["model"]
    for key in SHAPE:
        if mo.get(key) != mn.get(key):
            out.append(Change(f"model.{key}", mo.get(key), mn.get(key), "cannot",
                              "another model: the checkpoint's weights have other shapes or compute "
                              "another function (Megatron asserts num_layers, hidden_size and "
                              "num_attention_heads equal; the rest fails to load or trains a model the "
                              "weights were not trained for)",
                              "keep the model, or start a new run (a grown or pruned model is a "
                              "conversion of its own, then checkpoint.finetune_from)"))
    learned = "learned_absolute" in (mo["position_embedding"], mn["position_embedding"])
    megatron = _framework(new).megatron_arguments
    always = _capability(new, "max_positions_checked", "with-vocab-file") == "always"
    bloom = always and mn["position_embedding"] != "alibi"
    vocab_file = _at(new, "tokenizer.type") in VOCAB_FILE_TOKENIZERS
    if mo["max_position_embeddings"] != mn["max_position_embeddings"]:
        if learned:
            verdict, why = "cannot", "the learned position embedding has one row per position"
        elif megatron and (bloom or vocab_file):
            verdict, why = "cannot", ("Megatron compares --max-position-embeddings with the checkpoint's ("
                                      + ("BLOOM's fork: always, but with alibi" if bloom else
                                         "whenever the tokenizer reads a vocab file") + ") and refuses it")
        else:
            verdict, why = "safe", "rotary positions have no weights"
        out.append(Change("model.max_position_embeddings", mo["max_position_embeddings"],
                          mn["max_position_embeddings"], verdict, why,
                          "" if verdict == "safe" else f"keep model.max_position_embeddings: "
                          f"{mo['max_position_embeddings']}"))
    for key in BEHAVIOUR:
        if mo.get(key) != mn.get(key):
            out.append(Change(f"model.{key}", mo.get(key), mn.get(key), "safe",
                              "the same weights, used otherwise from the resumed step on (as a context "
                              "extension changes the rotary base or scaling on purpose)"))
    if mo["seq_length"] != mn["seq_length"]:
        out.append(Change("model.seq_length", mo["seq_length"], mn["seq_length"], "safe",
                          "no weight depends on it; the run counts what it consumed in samples, so it "
                          "resumes at the same sample number of a data index built for the new length "
                          f"(a sample now holds {mn['seq_length']:,} tokens, not {mo['seq_length']:,})"))
    same_tp = old["parallelism"]["tp"] == new["parallelism"]["tp"]  # (a tp change is a layout change)
    if megatron and mo["padded_vocab_size"] != mn["padded_vocab_size"] and same_tp:
        dist = old["checkpoint"]["format"] == "torch_dist"
        out.append(Change("model.padded_vocab_size", mo["padded_vocab_size"], mn["padded_vocab_size"],
                          "safe" if dist else "cannot",
                          "torch_dist loads an embedding padded otherwise" if dist else
                          "the embedding saved per rank has another number of rows",
                          "" if dist else f"keep model.make_vocab_size_divisible_by: "
                          f"{mo['make_vocab_size_divisible_by']}"))


def _tokenizer(old, new, out: list[Change]) -> None:
    to, tn = old["tokenizer"], new["tokenizer"]
    if to["type"] != tn["type"] and None not in (to["type"], tn["type"]):
        out.append(Change("tokenizer.type", to["type"], tn["type"], "cannot",
                          "the embeddings were learned for another tokenizer's token ids (Megatron also "
                          "compares --tokenizer-type when the tokenizer reads a vocab file)",
                          f"keep tokenizer.type: {to['type']}"))
    for key in ("model", "vocab_file", "merge_file"):
        if to[key] != tn[key] and to["type"] == tn["type"]:
            out.append(Change(f"tokenizer.{key}", to[key], tn[key], "safe",
                              "another path to the tokenizer: resuming assumes it is the same tokenizer "
                              "(other ids would undo what the embeddings learned)"))


def _layout(old, new, out: list[Change], weights_only: bool) -> None:
    po, pn = old["parallelism"], new["parallelism"]
    experts = bool(old["model"].get("num_experts"))
    changed = [k for k in LAYOUT if po.get(k) != pn.get(k) and (experts or k not in ("ep", "etp"))]
    fmt = old["checkpoint"]["format"]
    framework = _framework(new)
    for key in changed:
        out.append(_layout_change(f"parallelism.{key}", po.get(key), pn.get(key), old, new, weights_only))
    if po["cp"] != pn["cp"]:
        out.append(Change("parallelism.cp", po["cp"], pn["cp"], "safe",
                          "context parallelism splits the sequence, not the weights"))
    if po["dp"] != pn["dp"]:
        out.append(_dp_change(po["dp"], pn["dp"], old, new, weights_only))
    if po["zero_stage"] != pn["zero_stage"] and framework.sharding != "distributed_optimizer":
        if framework.fsdp:
            out.append(Change("parallelism.zero_stage", po["zero_stage"], pn["zero_stage"], "safe",
                              "FSDP's sharded checkpoint (torch.distributed.checkpoint) loads under either "
                              "sharding strategy"))
        elif not weights_only:
            out.append(Change("parallelism.zero_stage", po["zero_stage"], pn["zero_stage"], "convert",
                              "DeepSpeed saves the optimizer state in the partitions of its ZeRO stage",
                              UNIVERSAL.format(dir=shown(old["checkpoint"]["dir"]))
                              if framework.megatron_arguments else _plain_universal(old)))
    if po["distributed_optimizer"] != pn["distributed_optimizer"] \
            and framework.sharding == "distributed_optimizer" \
            and not weights_only:
        out.append(Change("parallelism.distributed_optimizer", po["distributed_optimizer"],
                          pn["distributed_optimizer"], "convert",
                          "the optimizer state is saved in the distributed optimizer's layout or in the "
                          "plain optimizer's, and gen-launch knows no load across them",
                          "keep parallelism.distributed_optimizer, or take the weights only "
                          "(checkpoint.finetune_from: the optimizer state starts anew)"))
    if framework.checkpoint_format is None and fmt != new["checkpoint"]["format"]:
        out.append(Change("checkpoint.format", fmt, new["checkpoint"]["format"],
                          "safe" if fmt == "torch" else "cannot",
                          "Megatron reads the format on disk and saves in NEW's from then on"
                          if fmt == "torch" else
                          "Megatron refuses to load a distributed checkpoint with --ckpt-format torch",
                          "" if fmt == "torch" else "keep checkpoint.format: torch_dist"))


def _layout_change(field: str, was: Any, now: Any, old, new, weights_only: bool) -> Change:
    framework, fmt = _framework(new), old["checkpoint"]["format"]
    if framework.checkpoint_format is None:  # megatron-core's --ckpt-format
        if fmt == "torch":
            return Change(field, was, now, "convert",
                          "a torch-format checkpoint holds one file per (tp, pp) rank: Megatron asserts "
                          "tensor and pipeline sizes equal (check_checkpoint_args)",
                          "convert the weights with Megatron's tools/checkpoint/convert.py --model-type GPT "
                          "--loader core --saver core --target-tensor-parallel-size "
                          f"{new['parallelism']['tp']} --target-pipeline-parallel-size "
                          f"{new['parallelism']['pp']} (the optimizer state is not converted), or resume "
                          "once at the old layout with checkpoint.format: torch_dist and "
                          "checkpoint.reshardable: true to save a checkpoint that reshards")
        if not old["parallelism"]["distributed_optimizer"] or weights_only:
            return Change(field, was, now, "safe", "torch_dist reshards the weights (and a plain "
                          "optimizer's state) on load")
        if old["checkpoint"].get("reshardable"):
            return Change(field, was, now, "safe", "torch_dist reshards the weights, and OLD saves the "
                          "distributed optimizer's state fully reshardable")
        return Change(field, was, now, "convert",
                      "torch_dist reshards the weights, but OLD saves the distributed optimizer's state "
                      "dp_reshardable (Megatron's default), which Megatron refuses to load at another "
                      "(tp, pp) (and whose buffers follow the layout of the model's parts)",
                      "give OLD checkpoint.reshardable: true (--dist-ckpt-optim-fully-reshardable, "
                      "core_v0.16 and later) before it saves, or resume once at the old layout with it "
                      "to save such a checkpoint; else take the weights only (checkpoint.finetune_from)")
    if framework.deepspeed_engine and framework.megatron_arguments:
        if new["checkpoint"].get("universal"):
            return Change(field, was, now, "safe", "NEW loads a universal checkpoint "
                          "(--universal-checkpoint), which holds every parameter whole")
        return Change(field, was, now, "convert",
                      "DeepSpeed saves one file per (tp, pp) rank and the optimizer state per "
                      "data-parallel rank; the fork asserts tensor and pipeline sizes equal",
                      UNIVERSAL.format(dir=shown(old["checkpoint"]["dir"])))
    if framework.checkpoint_format == "torch_dcp":
        return Change(field, was, now, "safe", "FSDP's sharded checkpoint (torch.distributed.checkpoint) "
                      "reshards on load")
    return Change(field, was, now, "convert", "DeepSpeed's pipeline checkpoint holds one file per stage",
                  _plain_universal(old))


def _plain_universal(old) -> str:
    return ("convert with python -m deepspeed.checkpoint.ds_to_universal --input_folder CKPT/global_stepN "
            "--output_folder CKPT/global_stepN_universal, and load it with DeepSpeed's "
            '"checkpoint": {"load_universal": true}')


def _dp_change(was: int, now: int, old, new, weights_only: bool) -> Change:
    field, framework = "parallelism.dp", _framework(new)
    if weights_only:
        return Change(field, was, now, "safe", "the weights do not depend on the data-parallel size")
    if framework.checkpoint_format is None:  # megatron-core's
        return Change(field, was, now, "safe", "Megatron saves the distributed optimizer's state "
                      "reshardable over data-parallel ranks (torch_dist: dp_reshardable; torch: gathered "
                      "per (tp, pp) rank)")
    if framework.checkpoint_format == "torch_dcp":
        return Change(field, was, now, "safe", "FSDP's sharded checkpoint (torch.distributed.checkpoint) "
                      "reshards on load")
    forked = framework.deepspeed_engine and framework.megatron_arguments  # Megatron-DeepSpeed
    partitioned = bool(old["parallelism"]["zero_stage"]) or (
        forked and old["training"]["precision"] == "bf16")
    if not partitioned:
        return Change(field, was, now, "safe", "without ZeRO the optimizer state is saved whole")
    if forked and new["checkpoint"].get("universal"):
        return Change(field, was, now, "safe", "NEW loads a universal checkpoint (--universal-checkpoint)")
    return Change(field, was, now, "convert",
                  "DeepSpeed saves the optimizer state partitioned over the data-parallel ranks (ZeRO, "
                  "or its BF16 optimizer under Megatron-DeepSpeed)",
                  UNIVERSAL.format(dir=shown(old["checkpoint"]["dir"])) if forked
                  else _plain_universal(old))


def _batch(old, new, out: list[Change]) -> None:
    bo, bn = old["batch"], new["batch"]
    same_global = bo["global_batch_size"] == bn["global_batch_size"]
    if bo["micro_batch_size"] != bn["micro_batch_size"] and same_global:
        out.append(Change("batch.micro_batch_size", bo["micro_batch_size"], bn["micro_batch_size"], "safe",
                          "no saved state depends on it; the accumulation steps follow "
                          f"({bo['gradient_accumulation_steps']} -> {bn['gradient_accumulation_steps']})"))
    if bo["global_batch_size"] != bn["global_batch_size"]:
        ratio = bn["tokens_per_step"] / bo["tokens_per_step"]
        why = (f"the token batch goes from {bo['tokens_per_step']:,} to {bn['tokens_per_step']:,} "
               f"({ratio:.3g}×): the learning rate is the schedule's, not rescaled for it")
        if new["launch"].get("trainer"):
            why += ("; the Trainer finds its place by skipping global step × accumulation batches of the "
                    "new loader, so it resumes at another sample than the one OLD reached")
        out.append(Change("batch.global_batch_size", bo["global_batch_size"], bn["global_batch_size"],
                          "safe", why))


def _schedule(old, new, out: list[Change]) -> None:
    so, sn = old["scheduler"], new["scheduler"]
    if not _framework(new).megatron_arguments:
        differ = [k for k in ("lr", "min_lr", "warmup_steps", "decay_steps", "decay_style")
                  if so.get(k) != sn.get(k)]
        for key in differ:
            out.append(Change(f"scheduler.{key}", so.get(key), sn.get(key), "safe",
                              "the scheduler restores its step and follows NEW's schedule from it (the "
                              "learning rate may jump at the resumed step)"))
        return
    checked = _capability(new, "scheduler_checked", SCHEDULE)
    differ = [k for k in checked if so.get(k) != sn.get(k)]
    if not differ:
        return
    follows = sn.get("follows")
    in_iterations = new["schedule"]["megatron_counts_in"] == "iterations"
    flag = _schedule_flags(new)
    for key in differ:
        if follows == "checkpoint":
            verdict, why = "safe", (f"NEW keeps OLD's schedule ({flag['checkpoint']}): its own value "
                                    "is not used")
        elif follows == "spec":
            verdict, why = "safe", f"NEW follows its own schedule from the resumed sample on ({flag['spec']})"
        else:
            unit = key.endswith("steps") and in_iterations
            verdict, why = "flags", ("Megatron's scheduler compares it with the checkpoint's and refuses "
                                     "a mismatch" + (" (its steps are samples: an iteration count × the "
                                                     "global batch)" if unit else ""))
        out.append(Change(f"scheduler.{key}", so.get(key), sn.get(key), verdict, why,
                          "" if verdict == "safe" else
                          f"set checkpoint.schedule: spec in NEW ({flag['spec']}: its schedule from the "
                          f"resumed sample on) or checkpoint ({flag['checkpoint']}: OLD's)"))


def _schedule_flags(record: dict[str, Any]) -> dict[str, str]:
    """{checkpoint.schedule value: the flag NEW's dialect writes for it} (from its table)."""
    d = dialect(_dialect(record), (record.get("dialect") or {}).get("release"))
    values = {"resume_schedule": "checkpoint", "override_schedule": "spec"}
    return {values[e.value]: e.flag for e in d.entries if e.value in values}


def _release(old, new, out: list[Change]) -> None:
    ro, rn = (old.get("dialect") or {}).get("release"), (new.get("dialect") or {}).get("release")
    if ro != rn:
        out.append(Change("megatron.version", ro, rn, "safe",
                          "a Megatron-LM release reads the checkpoints of earlier ones (torch_dist records "
                          "its format's version); going back to an earlier release than the one that "
                          "saved is not assured"))
