"""`gen-launch import`: existing launch files -> the spec they imply.

The linter's readers reconstruct the run (a script, what it sources, its DeepSpeed JSON); its
facts are mapped back to spec fields (importer/megatron.py, deepspeed.py, launch.py). What the
files do not say is marked in the YAML; a gen-launch plan.json beside the script supplies what
launch files never hold (GPU type, vocabulary size, model preset, flash attention).
"""

from __future__ import annotations

import json
import posixpath
from dataclasses import field
from pathlib import Path

from generator import __version__
from generator.calculator.dialect import split_argv
from generator.dialects import dialect, runs_flash_attention
from generator.errors import UserError, UserErrors
from generator.frameworks import ARGUMENT_DIALECTS, FRAMEWORKS, argument_dialect, framework_of, on_vendor
from generator.importer.additions import chains_itself, note_additions
from generator.importer.deepspeed import read_deepspeed
from generator.importer.draft import MARK, Draft, RuntimeWord, spec_word, to_yaml
from generator.importer.executors import read_executor
from generator.importer.hf_config import hf_draft, looks_like_hf_config
from generator.importer.launch import read_launch_facts
from generator.importer.megatron import read_megatron
from generator.importer.model import read_model
from generator.importer.registry import read_registry, write_shape
from generator.importer.trainer import read_accelerate, read_trainer
from generator.lint import gather
from generator.lint.discover import read_text
from generator.lint.engine import Run, lint_texts
from generator.readers.bash.evaluate import UNKNOWN
from generator.readers.launch import trainer_words
from generator.rules import Finding
from generator.spec.model import RUN_LENGTH
from generator.spec.schema import spec_schema
from generator.values import record

# shown even when equal to the schema's default: the numbers a reader looks for first
_ALWAYS = {"parallelism.tp", "parallelism.pp", "training.precision", "training.decay"}


@record
class Imported:
    """A spec drafted from existing launch files, with what lint found in them."""

    text: str  # the spec, YAML
    draft: Draft
    sources: list[str]  # the files it was read from
    findings: list[Finding] = field(default_factory=list)  # inconsistencies lint finds in them
    problems: list[tuple[str, str]] = field(default_factory=list)  # what could not be read


def import_paths(paths: list[Path]) -> Imported:
    hf = _hf_config(paths)
    if hf is not None:
        return hf
    texts, problems, extra = gather(paths)
    result = lint_texts(texts, extra)
    problems += result.unreadable
    runs = [r for r in result.runs if r.facts or r.ds_facts]
    if not runs and (problems or result.problems):
        raise UserErrors([UserError(f"{where}: cannot read: {why}")
                          for where, why in problems + result.problems])
    if not runs:
        raise UserError(f"{', '.join(map(str, paths))}: no launch script or DeepSpeed config found "
                        "(import reads .sh/.sbatch/.slurm scripts and DeepSpeed JSON)")
    if len(runs) > 1:
        raise UserError(f"{len(runs)} runs found ({', '.join(r.name for r in runs)}); import one "
                        "run at a time: name its script (with its JSON), or one stage or sweep "
                        "point folder")
    run = runs[0]
    launched = run.facts["executor_file"].value.file if "executor_file" in run.facts else run.name
    plan = _plan_json(launched, texts, extra)
    draft = build_draft(run, plan, chains_itself(texts.get(run.name) or ""))
    sources = [launched] + ([plan[0]] if plan else [])
    header = [f"Imported by gen-launch {__version__} from {', '.join(sources)}.",
              f'Lines marked "{MARK}" were not (fully) determined by the files: check them.']
    header += [f"note: {note}" for note in draft.notes]

    return Imported(to_yaml(draft, spec_schema(), header), draft, sources,
                    result.findings, result.problems + problems)


def _hf_config(paths: list[Path]) -> Imported | None:
    """A Hugging Face config.json (a JSON object with model_type) among the paths: the spec its
    model implies (importer/hf_config.py); None when there is none."""
    found = []
    for path in paths:
        if path.suffix == ".json" and path.is_file():
            text, _ = read_text(path)
            if text is not None and looks_like_hf_config(text):
                found.append((str(path), text))
    if not found:
        return None
    if len(paths) > 1:
        raise UserError(f"{found[0][0]}: a Hugging Face config.json is imported on its own (it gives "
                        "the model section; import the launch files separately and merge the model)")
    source, text = found[0]
    draft = hf_draft(text, source)
    header = [f"Imported by gen-launch {__version__} from {source} (a Hugging Face config.json).",
              f'Lines marked "{MARK}" were not (fully) determined by the file: check them.']
    header += [f"note: {note}" for note in draft.notes]
    return Imported(to_yaml(draft, spec_schema(), header), draft, [source])


def build_draft(run: Run, plan: tuple[str, dict] | None, chains: bool = False) -> Draft:
    """The spec the run's files imply; ``chains``: its script submits the next job itself."""
    facts = run.facts
    draft = Draft()
    framework = facts["framework"].value if "framework" in facts else (
        "deepspeed" if run.ds_facts else None)
    if framework is None:
        framework = next(iter(FRAMEWORKS))  # the schema's first: Megatron-LM
        draft.unknown("framework", "neither Megatron arguments nor a DeepSpeed config found", framework)
    else:
        draft.set("framework", framework)
    record = framework_of(framework)
    words = _entry_words(facts)
    given = {w.split("=", 1)[0] for w in words if w and w.startswith("--")}
    megatron_table = None
    built: dict = {}  # the model a config module builds (a config registry's)
    # Megatron and Trainer flags map to spec fields; a plain DeepSpeed script's arguments are its own
    ascend = "ascend" in facts and facts["ascend"].value
    trainer = "trainer" in facts and facts["trainer"].value is True
    if trainer:  # TrainingArguments (either spelling); its --deepspeed PATH is the JSON read below

        words = trainer_words(words) or words
        extra = read_trainer(_without_deepspeed_config(words, trainer=True), draft)
    elif record.config_registry:  # the reader walked its table already
        built = read_registry(framework, facts, draft)
        extra = []
    elif not record.megatron_arguments:
        extra = _without_deepspeed_config(words)
    else:
        found = facts["megatron_dialect"].value if "megatron_dialect" in facts else None
        name = on_vendor(found or argument_dialect(framework, None, None).name, "huawei" if ascend else None)
        if ARGUMENT_DIALECTS[name].fork is not None:
            draft.set("megatron.fork", ARGUMENT_DIALECTS[name].fork)
        megatron_table = dialect(name)
        extra = read_megatron(words, draft, megatron_table)
        _unknown_options(extra, dialect(name), draft)
    nodes = facts["nodes"].value if "nodes" in facts else None
    read_accelerate(facts, draft, nodes)
    if run.ds_facts:
        read_deepspeed(run.ds_facts, draft, owns_optimizer=record.plain_deepspeed)
    if facts:
        read_launch_facts(facts, run.name, draft)
    else:
        stem = posixpath.basename(run.name).rsplit(".", 1)[0]
        draft.unknown("name", "a DeepSpeed config without a launch script; named after it", stem)
        for key in ("nodes", "gpus_per_node", "gpu"):
            draft.unknown(f"cluster.{key}", "a DeepSpeed config without a launch script")
    if "executor_file" in facts:
        read_executor(facts["executor_file"].value, draft)
    draft.set("launch.extra_args", _runtime_words(extra, facts, draft))
    if record.dialect_setting == "megatron.version" and "megatron.version" not in draft.values:
        draft.unknown("megatron.version", "nothing in the files tells the release (only a batch "
                      "ramp or schedule would); latest assumed", "latest")
    if "training.flash_attention" not in draft.values:
        flash = runs_flash_attention(megatron_table)
        draft.unknown("training.flash_attention", "not in the files; used by the estimates only; "
                      + ("true assumed" if flash else f"false assumed ({megatron_table.title} has no "
                                                      "flash kernel)"), flash)
    if record.plain_deepspeed and "training.recompute" not in draft.values:
        draft.unknown("training.recompute", "plain DeepSpeed leaves activation checkpointing to "
                      "the training script; used by the estimates only; none assumed", "none")
    from_plan = plan[1] if plan else {}
    # a config module's flavor is the model (a plan.json's also holds values derived from it)
    read_model(draft, built or from_plan.get("model") or {})
    if built:
        write_shape(facts, draft)
    _from_plan(draft, from_plan, framework)
    _batch(draft, framework)
    _required(draft)
    _drop_defaults(draft)
    if facts:
        note_additions(draft, given, megatron_table, framework, chains, spec_schema())
    return draft


def _entry_words(facts) -> list[str | None]:
    if "entry_argv" not in facts:
        return []
    words: list[str | None] = []
    for text, shell in zip(facts["entry_argv"].value, facts["entry_argv_runtime"].value, strict=True):
        if shell:
            word = RuntimeWord(text)
            word.shell = shell
            words.append(word)
        else:
            words.append(text)
    return words


def _unknown_options(extra: list[str | None], d, draft: Draft) -> None:
    """Options the dialect's parser does not define (an entry point's own, or a mistake): the
    spec keeps them unchecked, marked."""
    _, problems = split_argv([w or "" for w in extra], d.catalogue, str(d))
    unknown = [p.word for p in problems if p.kind == "unknown"]
    if unknown:
        draft.set("launch.check_extra_args", False)
        draft.marks["launch.check_extra_args"] = (
            f"the files pass {', '.join(unknown)}, which {d} does not define: an entry point with "
            "options of its own? (true checks every word against the parser)")


def _runtime_words(extra: list[str | None], facts, draft: Draft) -> list:
    """The extra words for the spec: a word from the environment stays a run-time reference
    ({shell: "${NAME}"}); one that cannot be written so is left out with the flag it belongs
    to, and marked (never a bare flag left behind)."""
    out: list = []
    dropped: list[str] = []
    for word in extra:
        if word is not None and UNKNOWN not in word:
            out.append(word)
        elif isinstance(word, RuntimeWord):
            out.append(spec_word(word))
        else:
            flag = out.pop() if out and isinstance(out[-1], str) and out[-1].startswith("--") else None
            dropped.append(f"{flag} <run-time value>" if flag else "<run-time value>")
    if dropped:
        draft.marks["launch.extra_args"] = (f"left out, known only at run time: {', '.join(dropped)}; "
                                            "add them as {shell: ...} words")
    return out


def _without_deepspeed_config(words: list[str | None], trainer: bool = False) -> list[str | None]:
    """The words without the DeepSpeed config's name (``--deepspeed_config``, and for the
    Trainer ``--deepspeed``): the spec's ds_config.json takes its place."""
    flags = ("--deepspeed_config", "--deepspeed-config") + (("--deepspeed",) if trainer else ())
    out, skip = [], False
    for word in words:
        if skip:
            skip = False
        elif word in flags:
            skip = True
        elif not (word or "").startswith(tuple(f"{f}=" for f in flags)):
            out.append(word)
    return out


def _plan_json(script: str, texts: dict[str, str], extra) -> tuple[str, dict] | None:
    """The gen-launch plan.json beside the script, if there is one."""
    path = posixpath.join(posixpath.dirname(script), "plan.json")
    found = (path, texts[path]) if path in texts else extra(path)
    if found is None:
        return None
    try:
        data = json.loads(found[1])
    except ValueError:
        return None
    ok = isinstance(data, dict) and str(data.get("generator", "")).startswith("gen-launch")
    return (found[0], data) if ok else None


def _from_plan(draft: Draft, plan: dict, framework: str) -> None:
    """What launch files never hold, from plan.json: the GPU, flash attention, and the run
    length of a DeepSpeed run whose scheduler does not end."""
    if not plan:
        return
    gpu = (plan.get("cluster") or {}).get("gpu")
    if gpu and "cluster.gpu" in draft.marks:
        draft.set("cluster.gpu", gpu)
        del draft.marks["cluster.gpu"]
    training = plan.get("training") or {}
    for key in ("flash_attention", "recompute"):
        if f"training.{key}" in draft.marks and key in training:
            draft.set(f"training.{key}", training[key])
            del draft.marks[f"training.{key}"]
    average = (plan.get("data") or {}).get("average_sequence_length")
    if average:  # only explain uses it
        draft.set("data.average_sequence_length", average)
    schedule = plan.get("schedule") or {}
    deepspeed_scheduler = framework_of(framework).deepspeed_scheduler
    if deepspeed_scheduler and draft.get("training.decay") != "cosine" and \
            isinstance(schedule.get("min_lr"), int | float):
        draft.set("training.min_lr", schedule["min_lr"])  # WarmupDecayLR/WarmupLR do not use it
    iters = schedule.get("train_iters")
    if "training.train_iters" in draft.marks and isinstance(iters, int):
        draft.set("training.train_iters", iters)
        del draft.marks["training.train_iters"]


def _batch(draft: Draft, framework: str) -> None:
    given = [k for k in ("micro_batch_size", "gradient_accumulation_steps", "global_batch_size")
             if draft.get(f"batch.{k}") is not None]
    if draft.get("batch.schedule") is not None:
        return
    if given == ["micro_batch_size"] and framework_of(framework).megatron_arguments:
        draft.set("batch.gradient_accumulation_steps", 1)
        draft.notes.append("no --global-batch-size: Megatron's default, micro × dp (accumulation 1)")
    elif not given and "batch.micro_batch_size" not in draft.marks:
        draft.unknown("batch.micro_batch_size", "no micro batch in the arguments or the JSON")


def _required(draft: Draft) -> None:
    if not any(draft.get(f"training.{k}") is not None or f"training.{k}" in draft.marks
               for k in RUN_LENGTH):
        draft.unknown("training.train_iters", "no run length (--train-iters, --train-samples, "
                      "--max_steps or a scheduler's total_num_steps)")
    if draft.get("training.lr") is None and "training.lr" not in draft.marks:
        draft.unknown("training.lr", "no learning rate in the arguments or the JSON")


def _drop_defaults(draft: Draft) -> None:
    """Leave out what equals the schema's default, so the spec shows what is particular."""
    schema = spec_schema()["properties"]
    for path in list(draft.values):
        section, _, key = path.partition(".")
        sub = schema.get(section, {}).get("properties", {}).get(key, {})
        if path not in draft.marks and path not in _ALWAYS and "default" in sub and \
                draft.values[path] == sub["default"]:
            del draft.values[path]
