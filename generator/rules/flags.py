"""A script's Megatron flags against the parser it runs: refused (GL201), accepted and ignored
(GL222), or given a value the parser refuses (GL227).

The parser is the one the project declares or lint read from the repository the script runs
(``megatron_parser``, dialects/script_parser.py). Without either, the catalogue dialect the flags
fit best (``megatron_dialect``, readers/launch.py) stands in: a guess, so its finding is an error
only when that dialect defines every other flag the script passes and no dialect the flags fit
as well accepts it; otherwise a warning that names the dialects considered and how to declare
the parser. Certainty decides severity, never the rule alone."""

from __future__ import annotations

from generator.dialects import Dialect, Option, defined_by, dialect, judge_flags, plausible
from generator.dialects.script_parser import ScriptParser
from generator.frameworks import on_vendor
from generator.rules.dialect import did_you_mean
from generator.rules.registry import Uncertain, rule

DECLARE = ("declare the parser (gen-launch lint --dialect, or [tool.gen-launch] dialect / megatron-tree "
           "in pyproject.toml) or lint from the repository that holds it")


def script_dialect(megatron_dialect: str, ascend: bool | None = None) -> Dialect:
    """The catalogue dialect a script is judged by ("megatron-lm@core_v0.14": at that release;
    Megatron-LM on Ascend is MindSpeed-LLM)."""
    name, at, release = megatron_dialect.partition("@")
    return dialect(on_vendor(name, "huawei" if ascend else None) + at + release)


def fork_flags(megatron_flags: dict | None, megatron_dialect: str | None, concept: str) -> list[str]:
    """The script's flags of a concept (a word of their names: "pipeline") that its dialect does
    not define: a fork's own take on what a rule assumes (uneven stages), so the rule's premise
    may not hold where the script runs."""
    if not megatron_flags or megatron_dialect is None:
        return []
    d = script_dialect(megatron_dialect)
    return [f for f in megatron_flags if concept in f and f not in d.catalogue]


def _own_options(entrypoint: str | None) -> bool:
    """An entry point other than pretrain_*.py (tasks/main.py, a fine-tuning script) adds options
    of its own."""
    return entrypoint is not None and not entrypoint.rsplit("/", 1)[-1].startswith("pretrain_")


@rule("GL201", "megatron-removed-flag",
      "A Megatron flag that the parser the script runs does not define, or refuses.")
def removed_flag(megatron_flags: dict, megatron_dialect: str, ascend: bool | None = None,
                 entrypoint: str | None = None, megatron_parser: ScriptParser | None = None) -> str | None:
    """Each flag is judged by the parser the script runs: the one the project declares, else the
    repository's own (its ``megatron/arguments.py``, the entry point's added options, read
    statically), else the known release or fork its flags fit best (--deepspeed and the fork
    whose parser defines its flags for Megatron-DeepSpeed, MindSpeed's switches or an Ascend
    environment for MindSpeed-LLM, else current Megatron-LM). A flag the parser does not define
    is refused at start-up ("unrecognized arguments"); some defined flags are refused by
    validation (--checkpoint-activations in Megatron-LM); those accepted and ignored are notes
    (GL222). Only a known parser makes this an error: judged by a catalogue the script's flags do
    not all fit, it is a warning. Fix: the replacement named, or declare the parser.

    Example: --checkpoint-activations in a Megatron-LM script (use --recompute-activations);
    --recompute-granularity full in a script for BLOOM's fork (use --checkpoint-activations)."""
    if megatron_parser is not None and megatron_parser.from_source:
        return _against_repository(megatron_flags, megatron_parser)
    declared = megatron_parser if megatron_parser is not None and megatron_parser.dialect else None
    found = _against_catalogue(megatron_flags, script_dialect(megatron_dialect, ascend), entrypoint, declared)
    return _unsure_when_pinned(found, megatron_parser)


def _unsure_when_pinned(found, parser: ScriptParser | None):
    """A catalogue's verdict where the repository pins a tree that is not checked out: the script
    runs that snapshot's parser, which no catalogue is sure to be."""
    if found is None or parser is None or parser.pinned is None:
        return found
    return (Uncertain(f"{found[0]} (judged by the catalogue: the repository pins {parser.pinned}; check it "
                      "out, or declare the parser)"), *found[1:])


def _against_repository(flags: dict, parser: ScriptParser):
    """A parser read in part judges nothing: what was not read is not checked (lint says so in a
    GL901 note, lint/engine.py)."""
    missing = [f for f in flags if not parser.defines(f)]
    if not parser.certain or not missing:
        return None
    listed = "; ".join(f"{f} is not an option of {parser.label}{did_you_mean(f, parser.options.defined)}"
                       for f in missing)
    return listed, (), (missing[0], flags[missing[0]])


def _against_catalogue(flags: dict, d: Dialect, entrypoint: str | None, declared: ScriptParser | None):
    own = _own_options(entrypoint)
    problems = judge_flags(d, list(flags), elsewhere=not own or declared is not None)
    judged = {f for f, _ in problems}
    nowhere = [f for f in flags if f not in d.catalogue and f not in judged and not defined_by(f)]
    if declared is not None:
        problems += [] if own else [(f, f"is not an option of {d}{did_you_mean(f, d.catalogue.defined)}")
                                    for f in nowhere]
        if not problems:
            return None
        listed = "; ".join(f"{flag} {why}" for flag, why in problems)
        return f"{listed} ({declared.label})", (), (problems[0][0], flags[problems[0][0]])
    others = plausible(set(flags), d)[1:]
    fine = {flag: [str(o) for o in others if flag in o.catalogue and not judge_flags(o, [flag])]
            for flag, _ in problems}
    sure = [(flag, why) for flag, why in problems if not fine[flag]]
    undefined = [f for f in flags if f not in d.catalogue and f not in judged]
    if sure and not undefined:
        listed = "; ".join(f"{flag} {why}" for flag, why in sure)
        return listed, (), (sure[0][0], flags[sure[0][0]])
    unknown = [] if own else nowhere
    shown = problems + [(f, "") for f in unknown]
    if not shown:
        return None
    parts = [f"{flag} {why}" for flag, why in problems]
    if unknown:
        parts.append(f"{', '.join(unknown)}: not an option of any known Megatron parser")
    listed = "; ".join(parts)
    if sure:
        reason = (f"the script also passes {_some(undefined)}, which {d} does not define: it may run a "
                  "parser of its own")
    elif problems:
        where = ", ".join(dict.fromkeys(o for flag, _ in problems for o in fine[flag]))
        reason = f"fine in {where}, which the script's flags fit as well: it does not say which it runs"
    else:
        reason = f"judged by {', '.join([str(d), *map(str, others)])}"
    return Uncertain(f"{listed} ({reason}); {DECLARE}"), (), (shown[0][0], flags[shown[0][0]])


def _some(flags: list[str]) -> str:
    return ", ".join(flags[:3]) + (f" and {len(flags) - 3} more" if len(flags) > 3 else "")


@rule("GL222", "megatron-no-op-flag",
      "A Megatron flag that the script's own dialect accepts and ignores.", severity="note")
def no_op_flag(megatron_flags: dict, megatron_dialect: str, ascend: bool | None = None,
               megatron_parser: ScriptParser | None = None) -> str | None:
    """Some flags stay in a parser after what they switched became the default or moved
    elsewhere: ``--use-mcore-models`` (mcore models are the only ones), ``--use-flash-attn``
    (``--attention-backend`` chooses), ``--use-dist-ckpt``. The job runs as if they were not
    there, so this is a note, not an error (NVIDIA's own example scripts still pass them). Said
    only of a dialect known to ignore the flag, and never where the repository's own Python code
    reads it (``args.use_flash_attn`` in a fork: removing it would change the run).
    Fix: remove them, or use the option named.

    Example: --use-mcore-models in a Megatron-LM core_v0.16 script."""
    d = script_dialect(megatron_dialect, ascend)
    notes = judge_flags(d, list(megatron_flags), no_ops=True)
    if megatron_parser is not None and megatron_parser.from_source:
        reads = megatron_parser.reads
        options = megatron_parser.options
        notes = [] if reads is None else [(flag, why) for flag, why in notes
                                          if flag in options and options.get(flag).dest not in reads]
        notes = [(flag, f"{why} (and no code of the repository reads it)") for flag, why in notes]
    if not notes:
        return None
    listed = "; ".join(f"{flag} {why}" for flag, why in notes)
    return listed, (), (notes[0][0], megatron_flags[notes[0][0]])


@rule("GL227", "megatron-invalid-value",
      "A Megatron flag's value that its parser refuses: not one of its choices, or not of its type.")
def invalid_value(megatron_flag_values: dict, megatron_flags: dict, megatron_dialect: str,
                  ascend: bool | None = None, megatron_parser: ScriptParser | None = None) -> str | None:
    """argparse checks each value against the option's ``type`` (``int``, ``float``) and
    ``choices`` before anything runs: ``--position-embedding-type rotary`` ends the job with
    "invalid choice: 'rotary' (choose from learned_absolute, rope, …)". The choices and types are
    the parser's own: read from the repository's parser, or from the catalogue of the declared or
    detected release (then, as for GL201, an error only where no dialect the flags fit as well
    accepts the value). Values known only at run time are not checked. Fix: one of the choices.

    Example: --position-embedding-type rotary (Megatron-LM spells it rope)."""
    d = script_dialect(megatron_dialect, ascend)
    repository = megatron_parser is not None and megatron_parser.from_source
    declared = megatron_parser is not None and megatron_parser.dialect is not None
    others = [] if repository or declared else plausible(set(megatron_flags), d)[1:]
    fits = all(f in d.catalogue for f in megatron_flags)
    for flag, values in megatron_flag_values.items():
        if any(v is None for v in values):
            continue  # known only at run time
        if repository and flag in megatron_parser.options:
            option, label, known = megatron_parser.options.get(flag), megatron_parser.label, True
        elif repository or flag not in d.catalogue:
            continue
        else:
            option, label, known = d.catalogue.get(flag), str(d), declared or fits
        why = refusal(option, values)
        if why is None:
            continue
        message = f"{flag} {' '.join(values)}: {why} ({label})"
        accepted = [str(o) for o in others if o.catalogue.get(flag) is not None and
                    not refusal(o.catalogue.get(flag), values)]
        if accepted:
            message = Uncertain(f"{message}; fine in {', '.join(accepted)}, which the script's flags fit as "
                                f"well: {DECLARE}")
        elif not known:
            undefined = [f for f in megatron_flags if f not in d.catalogue]
            message = Uncertain(f"{message}; the script also passes {_some(undefined)}, which {d} does not "
                                f"define: {DECLARE}")
        return _unsure_when_pinned((message, (), (flag, megatron_flags.get(flag, ""))), megatron_parser)
    return None


def refusal(option: Option, values: tuple[str, ...]) -> str | None:
    """Why argparse refuses these values of ``option`` (its type, then its choices), or None."""
    convert = {"int": int, "float": float}.get(option.kind or "")
    for text in values:
        if convert is not None:
            try:
                converted = convert(text)
            except ValueError:
                return f"invalid {option.kind} value {text!r}"
        if option.choices and option.kind in (None, "str", "int", "float"):
            choices = option.choices if convert is None else {_number(c, convert) for c in option.choices}
            if (text if convert is None else converted) not in choices:
                return f"invalid choice {text!r}; choose from {', '.join(option.choices)}"
    return None


def _number(text: str, convert):
    try:
        return convert(text)
    except ValueError:
        return text


@rule("GL228", "entry-point-unknown-option",
      "An option the entry point's own argparse parser does not define, or a value it refuses.")
def entry_point_option(entry_parser: ScriptParser, megatron_flags: dict,
                       megatron_flag_values: dict | None = None) -> str | None:
    """A fine-tuning or example script that is not Megatron's (``train.py`` of the repository)
    parses its command line with its own argparse parser; where lint found that file and read it
    whole (every option added there, parsed strictly), a flag it does not define ends the job
    with "unrecognized arguments", and a value outside its choices or type with "invalid
    choice". With argparse's default allow_abbrev a unique prefix of an option is accepted.
    Fix: the option's spelling in that parser (the nearest is named).

    Example: --micro_batch_size 4 for a train.py that defines --microbatch_size."""
    label = entry_parser.label
    unknown = [f for f in megatron_flags if not entry_parser.defines(f)]
    if unknown:
        listed = "; ".join(f"{f} is not an option of {label}{did_you_mean(f, entry_parser.options.defined)}"
                           for f in unknown)
        return listed, (), (unknown[0], megatron_flags[unknown[0]])
    for flag, values in (megatron_flag_values or {}).items():
        option = entry_parser.options.get(flag)
        why = None if option is None or any(v is None for v in values) else refusal(option, values)
        if why is not None:
            return f"{flag} {' '.join(values)}: {why} ({label})", (), (flag, megatron_flags.get(flag, ""))
    return None
