"""Rules of the spec against its framework's dialect: what the dialect cannot write (GL218), and
the words of launch.extra_args against the dialect's parser (GL219 unknown or malformed flag,
GL220 a flag the plan already writes)."""

from __future__ import annotations

import difflib

from generator.rules.registry import rule


@rule("GL218", "dialect-cannot-express",
      "The spec asks for something the framework's dialect (fork, release) has no flag for.")
def cannot_express(dialect_unexpressed: tuple) -> str | None:
    """Each fork and release of Megatron has its own parser: BLOOM's Megatron-DeepSpeed fork has
    no GQA, RMSNorm or MoE flags, microsoft's has no ALiBi, WSD or FP8, and Megatron-LM has no
    ALiBi. Writing a flag that the parser does not define stops the job at start-up
    ("unrecognized arguments"); leaving it out trains another model than the one named. Fix:
    the other value, or a dialect that can express it (``megatron.fork``, ``megatron.version``,
    ``framework``), as listed.

    Example: model.normalization rmsnorm with framework megatron-deepspeed, megatron.fork
    bigscience."""
    field_, value, dialect, others = dialect_unexpressed
    fix = f"use {' or '.join(others)}" if others else "no Megatron dialect can; change the value"
    return f"{field_} {value!r} cannot be expressed in {dialect} (its parser has no flag for it); {fix}"


@rule("GL219", "unknown-flag",
      "A word of launch.extra_args is not an option of the framework's parser, or lacks its values.")
def unknown_flag(extra_arg_problem: tuple) -> str | None:
    """Megatron-LM and both Megatron-DeepSpeed forks build their parsers with
    ``allow_abbrev=False``: an unknown flag, a prefix of one, or a flag without its value ends
    the job at start-up with ``unrecognized arguments`` / ``expected one argument``, after its
    time in the queue. Fix: the spelling the dialect's parser defines (the nearest ones are
    named), or set ``launch.check_extra_args: false`` for an entry point that adds options of
    its own.

    Example: --save-intervall 1000 in launch.extra_args (Megatron-LM has --save-interval)."""
    return extra_arg_problem[0]


@rule("GL220", "flag-set-twice",
      "launch.extra_args repeats a flag that the plan already writes.")
def flag_set_twice(extra_arg_duplicate: tuple) -> str | None:
    """argparse keeps the last occurrence, so a repeated flag silently overrides the plan's value
    (and the files no longer agree with each other), or, for a switch, says nothing new. Fix:
    set the value in the spec field named, and remove it from extra_args.

    Example: --micro-batch-size 4 in launch.extra_args (batch.micro_batch_size)."""
    return extra_arg_duplicate[0]


@rule("GL221", "megatron-setting-ignored",
      "megatron.fork or megatron.version is given for a framework that does not read it.",
      severity="warning")
def setting_ignored(megatron_setting_ignored: tuple) -> str | None:
    """megatron.fork chooses the Megatron-DeepSpeed fork and means nothing to Megatron-LM;
    megatron.version chooses a Megatron-LM release and means nothing to the forks (each is one
    main branch); neither means anything to plain DeepSpeed or FSDP. A spec that sets one probably
    expects another framework. Fix: remove it, or set the framework it belongs to.

    Example: framework megatron-lm with megatron.fork bigscience."""
    setting, value, framework, belongs = megatron_setting_ignored
    return f"{setting} {value!r} is ignored with framework {framework}; it applies to {belongs}"


@rule("GL223", "run-io-not-written",
      "A data, tokenizer, checkpoint, logging or eval field the framework's arguments do not carry.")
def run_io_not_written(run_io_unwritten: tuple) -> str | None:
    """The data, tokenizer, checkpoint, logging and eval sections become Megatron's arguments
    (--data-path, --tokenizer-*, --save/--load, --wandb-*, --eval-*) for Megatron-LM, MindSpeed-LLM
    and both Megatron-DeepSpeed forks. The Hugging Face Trainer's TrainingArguments carry the
    checkpoint folder and interval (--output_dir, --save_steps), the evaluation interval
    (--eval_steps) and wandb (--report_to, --run_name, WANDB_PROJECT); the data, the tokenizer and
    the rest are its entry point's own arguments (its data and model arguments), as is everything
    a plain DeepSpeed entry point reads. Written nowhere, the run would start without them. Fix:
    pass them as the entry point's own arguments in launch.extra_args, or use a framework that
    takes them.

    Example: checkpoint.dir /ckpt with framework fsdp."""
    field_, framework = run_io_unwritten
    return (f"{field_} is not written for framework {framework} (its arguments do not carry it); pass it "
            "as the entry point's own argument in launch.extra_args")


def did_you_mean(flag: str, known) -> str:
    close = difflib.get_close_matches(flag, list(known), n=2, cutoff=0.75)
    return f"; did you mean {' or '.join(close)}?" if close else ""
