"""Group files into runs (a script, what it sources, the DeepSpeed JSON it writes or names),
assemble their facts and run the rules. Works on texts in memory, so the generator lints its
own output before writing it."""

from __future__ import annotations

import dataclasses
import json
import posixpath
import re
from collections import Counter
from dataclasses import field

from generator.dialects import defined_by, dialect
from generator.dialects.keyed import keyed_dialect
from generator.readers.accelerate_config import read_accelerate_config
from generator.readers.bash.evaluate import MAX_COMBINATIONS, UNKNOWN, readings
from generator.readers.deepspeed_json import read_deepspeed_json
from generator.readers.kubernetes import ExecutorFile, read_executor_file
from generator.readers.launch import accelerate_world, megatron_reading, read_launch
from generator.readers.neox_config import looks_like_neox_config, read_neox_config
from generator.readers.registry_config import config_model
from generator.readers.trainer_config import read_trainer_config
from generator.rules import Fact, Finding, run_rules
from generator.values import record

SCRIPT_SUFFIXES = (".sh", ".bash", ".slurm", ".sbatch")
CONFIG_SUFFIXES = (".json", ".conf")  # DeepSpeed configs are JSON whatever their name


@record
class Run:
    """One launch: the facts of a script and its DeepSpeed JSON (or a JSON on its own)."""

    name: str
    facts: dict[str, Fact] = field(default_factory=dict)
    ds_facts: dict[str, Fact] = field(default_factory=dict)


@record
class LintResult:
    """What linting a set of texts found, and what could not be read or followed."""

    findings: list[Finding] = field(default_factory=list)
    problems: list[tuple[str, str]] = field(default_factory=list)  # (location, what was not followed)
    unreadable: list[tuple[str, str]] = field(default_factory=list)  # (location, why a file is not read)
    missing: list[tuple[str, str]] = field(default_factory=list)  # (location, a named file that is nowhere)
    runs: list[Run] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (file, why it holds no launch)


class Context:
    """Where the texts live: the repository root a script's relative paths are resolved from
    (``root``, in the texts' own namespace) and the parser its entry point runs (``parser``).
    In memory (the generator linting its own output) there is neither."""

    def root(self, name: str) -> str | None:
        return None

    def parser(self, name: str, facts: dict[str, Fact]):
        return None


def is_script(name: str, text: str) -> bool:
    return name.endswith(SCRIPT_SUFFIXES) or text.startswith("#!") or "\n#SBATCH" in text


def lint_texts(texts: dict[str, str], extra=None, context: Context | None = None) -> LintResult:
    """Lint files given as {path: text}; ``extra(path)`` may supply other files on demand
    (sourced scripts, referenced JSON) as (path, text) or None; ``context`` says where they live."""
    result = LintResult()
    used_json: set[str] = set()
    context = context or Context()
    texts, launched_by, embedded = _with_mounted_files(texts)

    moves: dict[str, tuple[str, ...]] = {}  # script -> the folders it cds into (search_paths)

    def bases(near: str) -> list[str]:
        """Where a relative path a script names is looked for, as the script runs: the
        repository root and the folders the script cds into, then the script's own folder."""
        folder = posixpath.dirname(near)
        root = context.root(near)
        out = [root] if root is not None else []
        for moved in moves.get(near, ()):
            tail = moved.rsplit(UNKNOWN, 1)[-1].lstrip("/")
            if UNKNOWN not in moved and posixpath.isabs(moved):
                out.append(moved)
            elif tail:
                out += [posixpath.join(base, tail) for base in (*out[:1], folder)]
        return list(dict.fromkeys([*out, folder]))

    def find(path_text: str, near: str) -> tuple[str, str] | None:
        if not path_text:
            return None
        if UNKNOWN in path_text:  # e.g. "${DIR}/ds.json": look by the known tail
            tail = path_text.rsplit(UNKNOWN, 1)[-1].lstrip("/")
            candidates = [posixpath.join(base, tail) for base in bases(near)] if tail else []
        elif posixpath.isabs(path_text):
            candidates = [path_text]
        else:
            candidates = [posixpath.join(base, path_text) for base in bases(near)]
        for candidate in candidates:
            candidate = posixpath.normpath(candidate)
            if candidate in texts:
                return candidate, texts[candidate]
            if extra is not None and (found := extra(candidate)) is not None:
                return found
        return None

    sourced: set[str] = set(_copies_of_mounted(texts, launched_by))

    def follow(path_text: str, near: str) -> tuple[str, str] | None:
        found = find(path_text, near)
        if found is not None:
            sourced.add(found[0])
        return found

    # scripts that source others first, so that a sourced file is read as part of its script
    scripts = sorted((n for n, t in texts.items()
                      if not n.endswith(CONFIG_SUFFIXES) and (is_script(n, t) or n in launched_by)),
                     key=lambda n: _SOURCES.search(texts[n]) is None)

    def named(path: str, what: str, source: str, near: str, problems: list) -> tuple[str, str] | None:
        """The file a script names (marked as read with it); a warning that it exists nowhere
        (a relative path, written out, that the script does not make), else a note that it
        could not be resolved (run-time parts, a path outside the repository)."""
        found = find(path, near)
        if found is not None:
            used_json.add(found[0])
        elif UNKNOWN in path or posixpath.isabs(path) or context.root(near) is None or \
                _made_by(texts.get(near, ""), path):
            problems.append((source, f"{what} {path.replace(UNKNOWN, '…')} not found; its values "
                                     "are not checked"))
        elif problems is result.problems:  # the script's own reading, not one of its alternatives
            root, folder = posixpath.normpath(context.root(near)), posixpath.dirname(near) or "."
            looked = f"the repository root ({root})"
            if folder != root:
                looked += f" or the script's folder ({folder})"
            result.missing.append((source, f"{what} {path} exists nowhere: not under {looked}, where the "
                                           "script runs it; the run would fail to open it"))
        return found

    def run_of(name: str, read, problems: list) -> Run:
        """The run a reading of a script implies, with the configs it names or writes, and the
        parser its entry point runs where the context knows it."""
        run = Run(name, dict(read.facts))
        if "search_paths" in run.facts:
            moves[name] = run.facts["search_paths"].value
        parser = context.parser(name, run.facts)
        if parser is not None and "megatron_dialect" not in run.facts:
            run.facts["entry_parser"] = Fact(parser, run.facts["megatron_flags"].source)
        elif parser is not None:
            where = run.facts["megatron_dialect"].source
            run.facts["megatron_parser"] = Fact(parser, where)
            if parser.dialect or parser.nearest:
                run.facts["megatron_dialect"] = Fact(parser.dialect or parser.nearest, where)
            if problems is result.problems and parser.from_source:
                _partly_known(run.facts, parser, problems, result.missing)
        for path, source in read.accelerate_refs:
            if (found := named(path, "accelerate config", source, name, problems)) is None:
                continue
            facts, accelerate_problems = read_accelerate_config(found[1], found[0])
            problems += accelerate_problems
            for key, fact in facts.items():
                run.facts.setdefault(key, fact)
            if "framework" not in run.facts and "accelerate_framework" in facts:
                run.facts["framework"] = facts["accelerate_framework"]
            if "world_size" not in run.facts:
                accelerate_world(run.facts)
        for framework, path, source in read.config_modules:  # a config function (torchtitan)
            if (found := named(path, "config module", source, name, problems)) is None:
                continue
            facts, module_problems = config_model(framework, found[1], found[0])
            problems += module_problems
            for key, fact in facts.items():
                run.facts.setdefault(key, fact)
        json_refs = list(read.json_refs)
        for path, source in read.trainer_configs:
            if (found := named(path, "Trainer config", source, name, problems)) is None:
                continue
            facts, config_problems, config = read_trainer_config(found[1], found[0])
            problems += config_problems
            for key, fact in facts.items():
                run.facts.setdefault(key, fact)
            if config is not None:
                json_refs.append(config)
        for path, source in json_refs:
            written = [(t, first) for target, t, first in read.written_json
                       if _same_file(target, path)]
            filled = [(template, pairs, where) for target, template, pairs, where in read.filled
                      if target is not None and _same_file(target, path)]
            if filled:
                template, pairs, where = filled[-1]
                if (found := named(template, "config template", where, name, problems)) is None:
                    continue
                ds = read_deepspeed_json(fill(found[1], pairs), found[0])
            elif written:
                ds = read_deepspeed_json(written[-1][0], name, written[-1][1])
            elif (found := named(path, "DeepSpeed config", source, name, problems)) is not None:
                ds = read_deepspeed_json(found[1], found[0])
            else:
                continue
            problems += ds.problems
            run.ds_facts.update(ds.facts)
        return run

    branched: list[tuple[Run, list[tuple[str, Run]]]] = []
    for name in scripts:
        if name in sourced:
            continue
        text = texts[name]

        def resolve(p: str, near: str = name):
            return follow(p, near)

        read = read_launch(text, name, resolve)
        before = len(result.problems)
        result.problems += read.problems
        run = run_of(name, read, result.problems)
        if name in launched_by:
            _pod_facts(run, launched_by[name], read.defaulted)
        result.runs.append(run)
        noted = len(result.problems) > before
        unread = run.facts.get("unread_launcher")
        if unread is not None:  # its entry point's options are checked, not its launch
            result.skipped.append((name, f"{unread.value} (a launcher lint does not read)"))
        elif not _LAUNCH.intersection(run.facts) and not any(k.startswith("sbatch_") for k in run.facts):
            result.skipped.append((name, "no launch recognised"))
        elif not noted and (note := _unchecked(run)) is not None:  # one word for the file is enough
            result.problems.append(note)
        scenarios = _scenarios(read.undecided)
        if scenarios:
            alternatives = [(label, run_of(name, read_launch(text, name, resolve, decide), []))
                            for label, decide in _labelled(scenarios, read.undecided)]
            branched.append((run, alternatives))
    for name, text in texts.items():
        if name.endswith(CONFIG_SUFFIXES) and name not in used_json:
            if _plainly_not_deepspeed(text):  # data, vocabularies, package.json: no located read
                result.skipped.append((name, "JSON that is not a DeepSpeed config"))
                continue
            ds = read_deepspeed_json(text, name)
            # JSON no script names is checked when it looks like a DeepSpeed config or is not
            # JSON at all; other JSON (plan.json, a sweep's index.json) is not a launch file,
            # nor is a .conf file that is not a DeepSpeed config
            if not name.endswith(".json") and not ds.looks_like_deepspeed:
                result.skipped.append((name, "not a DeepSpeed config"))
            elif ds.looks_like_deepspeed or (ds.problems and not ds.parsed):
                if ds.parsed:
                    result.problems += ds.problems
                elif _TEMPLATE.search(text):  # placeholders a script fills in (sed): not a config yet
                    result.problems += [(where, f"a config template, read only as a script fills it "
                                                f"in ({why})") for where, why in ds.problems]
                else:
                    result.unreadable += ds.problems
                result.runs.append(Run(name, {}, ds.facts))
            else:
                result.skipped.append((name, "JSON that is not a DeepSpeed config"))
    for name, text in texts.items():
        if name.endswith((".yml", ".yaml")) and name not in used_json and looks_like_neox_config(text):
            facts, problems = read_neox_config(text, name)
            result.unreadable += problems
            if facts:
                result.runs.append(Run(name, facts))
    alternatives_of = {id(run): alternatives for run, alternatives in branched}
    for run in result.runs:
        if id(run) in alternatives_of:
            result.findings += _across(alternatives_of[id(run)])
        else:
            result.findings += check_run(run)
    if embedded:
        result.findings = [_in_the_yaml(f, embedded) for f in result.findings]
    return result


def _with_mounted_files(texts: dict[str, str]) -> tuple[dict[str, str], dict[str, ExecutorFile], dict]:
    """The texts with the files each Kubernetes executor's pods mount (its ConfigMaps' keys), the
    executor file that runs each script (by the script's name), and where each embedded text
    lies in its YAML file (by its name)."""
    out, launched_by, embedded = dict(texts), {}, {}
    for name, text in texts.items():
        if name.endswith((".yaml", ".yml")) and (read := read_executor_file(text, name)) is not None:
            out.update(read.mounted)
            embedded.update(read.embedded)
            if read.script is not None:
                launched_by[read.script] = read
    return out, launched_by, embedded


_PLACE = re.compile(r"^(?P<name>.+?):(?P<line>\d+):(?P<col>\d+)(?: \((?P<note>.*)\))?$")


def _in_the_yaml(finding: Finding, embedded: dict) -> Finding:
    """A finding in a text embedded in a YAML file (a ConfigMap key, a bash -c command, a
    SkyPilot run) located at the YAML file's own line and column, the embedded text named."""
    values = []
    for fact, source in finding.values:
        m = _PLACE.match(source)
        if m and m["name"] in embedded:
            place = embedded[m["name"]].place(int(m["line"]), int(m["col"]))
            source = place[:-1] + f"; {m['note']})" if m["note"] else place
        values.append((fact, source))
    return dataclasses.replace(finding, values=tuple(values))


def _copies_of_mounted(texts: dict[str, str], launched_by: dict[str, ExecutorFile]) -> list[str]:
    """Files beside an executor's file that are copies of what its ConfigMap mounts (generate
    writes megatron_args.sh both ways): read once, as the pods read them."""
    out = []
    for executor in {id(e): e for e in launched_by.values()}.values():
        folder = posixpath.dirname(executor.file)
        for name, text in executor.mounted.items():
            beside = posixpath.join(folder, name.rsplit("/", 1)[-1])
            if beside != name and texts.get(beside, "").lstrip("\n") == text.lstrip("\n"):
                out.append(beside)
    return out


def _pod_facts(run: Run, executor: ExecutorFile, defaulted: set[str]) -> None:
    """The executor's facts on the run of the script its pods run (and the file, for import);
    the node count and processes the operator injects (PET_NNODES, PET_NPROC_PER_NODE) are
    torchrun's where no flag gives them (they come before its defaults)."""
    run.facts["executor_file"] = Fact(executor, executor.file)
    injected = {"injected_nodes": "launcher_nodes", "injected_procs": "procs_per_node"}
    replaced = False
    for key, fact in executor.facts.items():
        name = injected.get(key)
        if name is None:
            run.facts[key] = fact
        elif name not in run.facts or name in defaulted:
            run.facts[name] = fact
            replaced = True
    if replaced and {"launcher_nodes", "procs_per_node"} <= run.facts.keys():  # the world they make
        nodes = run.facts["nodes"] = run.facts["launcher_nodes"]
        run.facts["world_size"] = Fact(nodes.value * run.facts["procs_per_node"].value, nodes.source)


# facts that say a script launches something (besides its #SBATCH header's): else it is skipped
_LAUNCH = {"launcher", "entrypoint", "megatron_flags", "srun_line"}
_SIZES = ("micro_batch_size", "global_batch_size", "tp", "pp", "num_layers", "hidden_size", "seq_length")


def _unchecked(run: Run) -> tuple[str, str] | None:
    """A GL901 note for a script that starts a Megatron or DeepSpeed entry point (pretrain_*.py,
    the deepspeed launcher, --deepspeed) but gave no batch or layout value to check (its
    arguments come from positional parameters, a file, the environment): nothing goes unchecked
    without a word."""
    entry = run.facts.get("entrypoint")
    if entry is None or run.ds_facts or any(name in run.facts for name in _SIZES):
        return None
    launcher = run.facts.get("launcher")
    argv = [w or "" for w in (run.facts["entry_argv"].value if "entry_argv" in run.facts else ())]
    megatron = posixpath.basename(entry.value or "").startswith("pretrain_")
    deepspeed = (launcher is not None and launcher.value == "deepspeed") or \
        any(w.startswith(("--deepspeed", "--deepscale")) for w in argv)
    if not (megatron or deepspeed):
        return None
    argv = run.facts.get("entry_argv")
    given = "no arguments" if argv is None or not argv.value else "only arguments lint cannot read"
    shown = (entry.value or "?").replace(UNKNOWN, "…")
    return (entry.source, f"{shown} is started with {given} (no batch, parallel or model size): the "
                          "batch and layout checks did not run")


def _partly_known(facts: dict[str, Fact], parser, problems: list, missing: list) -> None:
    """What a parser read from a repository leaves unknown, said once: an entry point that is
    not where the script runs it (GL903 where it surely should be, else a note), flags outside
    what could be read of a parser read in part (a note: not checked)."""
    where = facts["megatron_dialect"].source
    if parser.entry_missing is not None:
        given, sure = parser.entry_missing
        if sure:
            missing.append((facts["entrypoint"].source, f"entry point {given} exists nowhere in the "
                            "repository that is its Megatron tree; the run would fail to start"))
        else:
            problems.append((where, f"entry point {given} not found: the options it adds are not known"))
    if parser.certain:
        return
    flags = facts["megatron_flags"].value
    unknown = [f for f in flags if f not in parser.options and not defined_by(f)]
    if unknown and parser.entry_missing is None:
        shown = ", ".join(unknown[:4]) + (f" and {len(unknown) - 4} more" if len(unknown) > 4 else "")
        problems.append((flags[unknown[0]], f"{shown}: not in what could be read of {parser.label} "
                                            f"({parser.why_partial()}); not checked"))


def _plainly_not_deepspeed(text: str) -> bool:
    """Valid strict JSON that names no DeepSpeed key anywhere: told apart at the C parser's speed
    (a repository's data and tokenizer files are most of its JSON); anything else is read."""
    if any(f'"{key}"' in text for key in keyed_dialect("deepspeed").table["detection_keys"]):
        return False
    try:
        json.loads(text)
    except (ValueError, RecursionError):  # not strict JSON, or nested past the C parser: read it
        return False
    return True


def _made_by(script: str, path: str) -> bool:
    """Whether a script writes a file it names itself (a redirect, cp, a generator): its name
    appears more than once."""
    return script.count(posixpath.basename(path)) > 1


_TEMPLATE = re.compile(r'":\s*[A-Z][A-Z0-9_]{2,}\s*[,}\n]')  # "train_batch_size": CONFIG_BATCH_SIZE,
# readings of one script's undecided branches in every combination (more: each branch on its
# own, see readers.bash.evaluate.readings, which also writes the note that says so)
MAX_ALTERNATIVES = MAX_COMBINATIONS


def _scenarios(undecided: dict) -> list[dict[int, int]]:
    """The readings of the undecided branches' alternatives ({branch: arm index}): every
    combination, or, when there are more than MAX_ALTERNATIVES, each branch's arms one at a time;
    none when even those are too many."""
    return readings(undecided)[0]


def _labelled(scenarios: list[dict[int, int]], undecided: dict):
    """((how to name it, the branch it varies when each branch is read on its own, else None),
    decide) for each reading: ("MODEL_SIZE is 13B (line 12) and the branch at line 30 runs", None)."""
    alone = readings(undecided)[1]
    for decide in scenarios:
        label = " and ".join(dict(undecided[branch])[index] for branch, index in decide.items())
        yield (label, next(iter(decide)) if alone else None), decide


def _across(alternatives: list[tuple[tuple[str, int | None], Run]]) -> list[Finding]:
    """Findings over the alternatives of a script's undecided branches, a rule on the same
    facts counted once: an error only when every alternative breaks it (the messages of each
    named when they differ); when some do, a warning naming them (the script may be right as
    run, but that depends on a value it does not set). Branches read one at a time are grouped:
    every run takes one arm of each, so an error is a rule broken in every arm of one of them."""
    found = [(label, group, {(f.code, tuple(n for n, _ in f.values)): f for f in check_run(run)})
             for (label, group), run in alternatives]
    sizes = Counter(group for _, group, _ in found)
    out: list[Finding] = []
    seen: set = set()
    for _, _, findings in found:
        for key, finding in findings.items():
            if key in seen:
                continue
            seen.add(key)
            having = [(label, group, f[key]) for label, group, f in found if key in f]
            by_group = {group: [(label, f) for label, g, f in having if g == group] for group in sizes}
            whole = [those for group, those in by_group.items() if len(those) == sizes[group]]
            if whole:  # every alternative breaks it (of one branch, when each is read on its own)
                those = whole[0]
                messages = list(dict.fromkeys(f.message for _, f in those))
                message = messages[0] if len(messages) == 1 else "; ".join(
                    f"when {label}: {f.message}" for label, f in those)
                out.append(dataclasses.replace(those[0][1], message=message))
            elif finding.severity != "error":
                out.append(finding)
            else:
                labels = " or ".join(label for label, _, _ in having)
                out.append(dataclasses.replace(finding, severity="warning", message=(
                    f"{finding.message} (only when {labels}: the condition is known only at run "
                    "time)")))
    return out


def _same_file(written: str, named: str) -> bool:
    """A file a script writes and one it names are the same when their names are (folders are
    often run-time values)."""
    return posixpath.basename(written.replace(UNKNOWN, "")) == posixpath.basename(named.replace(UNKNOWN, ""))


def fill(template: str, substitutions: list[tuple[str, str | None]]) -> str:
    """A template with sed's literal substitutions applied, as the script writes it; a value
    known only at run time becomes null (not checked)."""
    for placeholder, value in substitutions:
        template = template.replace(placeholder, "null" if value is None else value)
    return template


def views(run: Run) -> list[dict[str, Fact]]:
    """The run seen from its script (Megatron arguments first) and from its DeepSpeed JSON."""
    script = dict(run.facts)
    script.update(run.ds_facts)
    for ds_name, generic in keyed_dialect("deepspeed").generic_facts().items():
        if ds_name in run.ds_facts and generic not in script:
            script[generic] = run.ds_facts[ds_name]
    if run.ds_facts and "framework" not in script and "launcher" in script:
        script["framework"] = Fact("deepspeed", next(iter(run.ds_facts.values())).source)
    offloads = [run.ds_facts[n] for n in ("ds_offload_param", "ds_offload_optimizer")
                if run.ds_facts.get(n, Fact("none", "")).value not in (None, "none")]
    if offloads and "zero_offload" not in script:  # what the JSON offloads, as GL110 reads it
        both = "ds_offload_param" in run.ds_facts and offloads[0] is run.ds_facts["ds_offload_param"]
        script["zero_offload"] = Fact("optimizer_and_params" if both else "optimizer", offloads[0].source)
    for generic, ds_name in (("cp", "ds_sequence_parallel_size"), ("pp", "ds_pipeline_stages")):
        if generic not in script and isinstance(run.ds_facts.get(ds_name, Fact(None, "")).value, int):
            script[generic] = run.ds_facts[ds_name]  # Ulysses; a PipelineModule's stages
    if run.facts:  # a launch: parallel sizes not given are Megatron's and DeepSpeed's default 1
        ints = megatron_reading()[0]  # (a flag given a run-time value is not "not given")
        given = {ints[f] for f in (run.facts["megatron_flags"].value if "megatron_flags" in run.facts else ())
                 if f in ints}
        for name in ("tp", "pp", "cp", "ep"):
            if name not in given:
                script.setdefault(name, Fact(1, "default"))
    _data_parallel(script)
    _schedule_in_iterations(script)
    if not any(k in run.ds_facts for k in keyed_dialect("deepspeed").generic_facts()):
        return [script]
    deepspeed = {k: f for k, f in script.items()  # the accumulation is the JSON's, or its own
                 if not (k == "gradient_accumulation_steps" and f.source == "derived")}
    for ds_name, generic in keyed_dialect("deepspeed").generic_facts().items():
        if ds_name in run.ds_facts:
            deepspeed[generic] = run.ds_facts[ds_name]
    _accumulation(deepspeed)
    return [script, deepspeed]


def _data_parallel(facts: dict[str, Fact]) -> None:
    """dp = world / (tp × pp × cp) when the world is known and divisible (GL003 says otherwise)."""
    world = facts.get("world_size")
    if world is None or "dp" in facts:
        return
    model = 1
    for name in ("tp", "pp", "cp"):
        model *= facts[name].value if name in facts and isinstance(facts[name].value, int) else 1
    if model and world.value % model == 0:
        facts["dp"] = Fact(world.value // model, "derived")
    _accumulation(facts)


def _accumulation(facts: dict[str, Fact]) -> None:
    """Megatron's micro-batches per step = global / (micro × dp), when they divide (GL002 says
    otherwise), for the rules that count them (GL016)."""
    given = [facts.get(n) for n in ("global_batch_size", "micro_batch_size", "dp")]
    if "gradient_accumulation_steps" in facts or any(f is None or not isinstance(f.value, int) or not f.value
                                                     for f in given):
        return
    total, micro, dp = (f.value for f in given)
    if total % (micro * dp) == 0:
        facts["gradient_accumulation_steps"] = Fact(total // (micro * dp), "derived")


def _schedule_in_iterations(facts: dict[str, Fact]) -> None:
    """Megatron's warmup and decay lengths in iterations (samples / global batch)."""
    gbs = facts.get("global_batch_size")
    for iters, samples, target in (("lr_warmup_iters", "lr_warmup_samples", "warmup_iters"),
                                   ("lr_decay_iters", "lr_decay_samples", "train_iters"),
                                   ("train_iters", "train_samples", "train_iters")):
        if target in facts and target != iters:
            continue
        if iters in facts:
            facts[target] = facts[iters]
        elif samples in facts and gbs and gbs.value:
            facts[target] = Fact(facts[samples].value // gbs.value, facts[samples].source)


def check_run(run: Run) -> list[Finding]:
    """The run's findings, each naming the parser its script runs (where it has Megatron's)."""
    seen: dict[tuple[str, str], Finding] = {}
    for facts in views(run):
        for finding in run_rules(facts):
            seen.setdefault((finding.code, finding.message), finding)
    named = parser_named(run.facts)
    found = [_guessed(_assumed(f), run.facts) for f in seen.values()]
    return [dataclasses.replace(f, parser=named) for f in found] if named else found


# a script that reads others as its own (source, ., a job file it submits) is read before them
_SOURCES = re.compile(r"(?m)(?:^|[;&|({]\s*)(?:source|\.|sbatch)\s")
_SLURM_DEFAULT = re.compile(r"default of \$\{(SLURM_\w+)")


def _guessed(finding: Finding, facts: dict[str, Fact]) -> Finding:
    """An error a rule draws from the script's dialect (a capability: vpp, FP8, a ramp-up) where
    that dialect is only guessed from flags it does not all define: the script may run a parser
    of its own, so a warning that says so. (GL201/GL227 weigh their own certainty and name only the
    flag they are about, not megatron_dialect, so this leaves them alone.)"""
    if finding.severity != "error" or "megatron_parser" in facts or \
            "megatron_dialect" not in facts or all(name != "megatron_dialect" for name, _ in finding.values):
        return finding
    d = dialect(facts["megatron_dialect"].value)
    undefined = [f for f in facts["megatron_flags"].value if f not in d.catalogue]
    if not undefined:
        return finding
    shown = ", ".join(undefined[:3]) + (f" and {len(undefined) - 3} more" if len(undefined) > 3 else "")
    return dataclasses.replace(finding, severity="warning", message=(
        f"{finding.message} (if it runs {d}, guessed from its flags: it also passes {shown}, which {d} does "
        "not define; declare the parser to be sure)"))


def _assumed(finding: Finding) -> Finding:
    """An error that rests on the default of a variable Slurm sets (``${SLURM_NNODES:-1}``) holds
    only outside Slurm: under it the allocation decides. A warning that says so."""
    m = next((m for _, source in finding.values if (m := _SLURM_DEFAULT.search(source))), None)
    if finding.severity != "error" or m is None:
        return finding
    return dataclasses.replace(finding, severity="warning", message=(
        f"{finding.message} (with ${m[1]}'s default; under Slurm the allocation decides)"))


def parser_named(facts: dict[str, Fact]) -> str | None:
    """How a finding names the parser a script runs: declared, read from the repository (with the
    release or fork nearest it), or the catalogue its flags fit, as a guess."""
    parser = facts.get("megatron_parser")
    if parser is not None:
        p = parser.value
        return p.label if not p.nearest else f"{p.label} (nearest {dialect(p.nearest)})"
    if "megatron_dialect" in facts:
        return f"{dialect(facts['megatron_dialect'].value)}, guessed from the flags (nothing declared)"
    return None
