"""A launch script (sbatch or plain shell) -> facts: the #SBATCH allocation, the launcher and
its process counts, the Megatron arguments of the entry point, the environment, the Slurm
variables it reads, and the DeepSpeed JSON it writes (heredoc) or names (--deepspeed_config).
Static only: see generator/readers/bash."""

from __future__ import annotations

import re
import shlex
from dataclasses import field
from functools import cache

from generator.dialects import all_entries, detect, dialect
from generator.dialects.argv import is_flag, split
from generator.dialects.launchers import started_by
from generator.dialects.slurm import value_options
from generator.readers.bash import Command, Field, Script, read_script
from generator.readers.bash.evaluate import UNKNOWN, shell_code
from generator.readers.registry_args import registry_dialect_of, registry_facts
from generator.readers.registry_config import registry_model, registry_modules
from generator.rules.registry import Fact
from generator.values import record

_PEEL = {"exec", "nohup", "time", "stdbuf", "numactl", "taskset"}
# the Megatron choices the rules read whether a flag gives them or the parser's default does
# (GL229, GL233-GL237): absent, the detected dialect's default is what the run gets (a layout has
# none: the even split)
_CHOICES = {"moe_router_score_function", "moe_router_pre_softmax", "moe_load_balancing", "linear_bias",
            "moe_token_dispatcher", "ep_comm_overlap", "moe_grouped_gemm", "multi_latent_attention",
            "recompute", "recompute_modules", "pipeline_layout", "ckpt_format"}
# the Megatron values that are counts (at least 1): the rules divide by them, so 0 (or less)
# written in a script is a note and an unknown, never a division by zero
_COUNTS = {"tp", "pp", "cp", "ep", "etp", "vpp", "micro_batch_size", "global_batch_size", "num_layers",
           "hidden_size", "ffn_hidden_size", "num_attention_heads", "num_query_groups", "kv_channels",
           "seq_length", "layers_per_virtual_stage", "make_vocab_size_divisible_by", "moe_top_k",
           "moe_router_num_groups", "moe_router_group_topk"}
# launchers of training jobs that lint does not read (their own CLIs and config formats): a
# script that starts one is counted as skipped, with its name, never as checked and clean
_MPI = ("mpirun", "mpiexec")  # start one process per rank, as srun does
UNREAD_LAUNCHERS = {"colossalai", "mpirun", "mpiexec", "composer", "tune", "swift", "xtuner", "torchx",
                    "ray", "sky", "lightning", "fairseq-train", "tuna", "oobleck"}


def _dialect_of_words(texts: list[str | None]):
    """The Megatron dialect an entry point's words are written in (see dialects.detect)."""
    names = {t.partition("=")[0] for t in texts if is_flag(t)}
    joined = {f"{t}={texts[k + 1]}" for k, t in enumerate(texts[:-1]) if is_flag(t)} | set(texts)
    return detect(names, frozenset({"position_embedding=alibi"} if _alibi_spellings() & joined else ()))


@cache
def _alibi_spellings() -> frozenset[str]:
    """"--flag=value" for every dialect's spelling of ALiBi (the mark of BLOOM's fork)."""
    return frozenset(f"{e.flag}={e.map['alibi']}" for e in all_entries()
                     if e.value == "position_embedding" and e.map and "alibi" in e.map)


def _substitutions(script: str) -> list[tuple[str, str | None]]:
    """The literal substitutions of a sed script (``s/PLACEHOLDER/value/g``, any delimiter,
    several separated by ``;``): [(placeholder, value or None when run-time)]; a pattern with
    regular-expression characters is skipped (not a placeholder)."""
    out = []
    for part in script.split(";"):
        part = part.strip()
        if len(part) < 4 or part[0] != "s":
            continue
        delimiter = part[1]
        pieces = part[2:].split(delimiter)
        if len(pieces) < 2 or not re.fullmatch(r"[A-Za-z0-9_]+", pieces[0]):
            continue
        value = pieces[1]
        out.append((pieces[0], None if UNKNOWN in value else value))
    return out


def trainer_words(texts: list[str | None]) -> list[str | None] | None:
    """The words of a Hugging Face Trainer entry point, each TrainingArguments flag under its
    field's name (HfArgumentParser also takes ``--per-device-train-batch-size``); None when the
    words are not a Trainer's: no TrainingArguments flag spelled with an underscore (Megatron's
    flags are all dashed, and some dashed ones, --weight-decay, are fields' aliases too) and no
    ``--deepspeed PATH.json`` (DeepSpeed's and Megatron-DeepSpeed's ``--deepspeed`` is a switch)."""
    known = dialect("trainer").catalogue
    out, own = [], False
    for k, text in enumerate(texts):
        if is_flag(text):
            name, eq, value = text.partition("=")
            field_name = "--" + name[2:].replace("-", "_")
            if field_name in known:
                following = value if eq else (texts[k + 1] if k + 1 < len(texts) else None)
                own = own or ("_" in name and name not in ("--deepspeed_config", "--local_rank")) or \
                    (field_name == "--deepspeed" and _json_path(following))
                text = field_name + eq + value
        out.append(text)
    return out if own else None


def _json_path(text: str | None) -> bool:
    return text is not None and not text.startswith("-") and text.rstrip("'\"").endswith(".json")


def _arity_in(d):
    """Each option's arity in the dialect's parser (the table's where the parser lists names
    only); None for an option it does not define."""
    table = {e.flag: e.arity for e in d.entries}

    def arity(flag: str):
        option = d.catalogue.get(flag)
        if option is None or option.arity == "*" and flag in table:
            return table.get(flag)
        return option.arity

    return arity


@cache
def _trainer_reading() -> dict[str, str]:
    """{Trainer flag carrying a whole number: fact} from the Trainer's table."""
    return {e.flag: e.value for e in dialect("trainer").entries if e.type == "int"}


@cache
def megatron_reading() -> tuple[dict[str, str], dict[str, str], set[str]]:
    """From the dialect tables: {int flag: fact}, {switch flag: fact} over every Megatron
    dialect, and the flags that mark an argument list as Megatron's (batch and layout)."""
    ints = {e.flag: e.fact or e.value for e in all_entries() if e.type == "int" and e.nargs == 1}
    switches = {e.flag: e.fact or e.value for e in all_entries()
                if e.switch and e.when is True and e.value}
    hints = {e.flag for e in all_entries() if e.value in (
        "micro_batch_size", "global_batch_size", "tp", "pp", "num_layers", "seq_length")}
    return ints, switches, hints


@record
class LaunchRead:
    """What one script says: facts, plus the DeepSpeed JSON it writes or refers to."""

    facts: dict[str, Fact] = field(default_factory=dict)
    written_json: list[tuple[str, str, int]] = field(default_factory=list)  # (path, text, first line)
    # configs filled in from a template by sed: (output path, template path, [(placeholder,
    # value or None when not known)], where the sed command is)
    filled: list[tuple[str, str, list[tuple[str, str | None]], str]] = field(default_factory=list)
    json_refs: list[tuple[str, str]] = field(default_factory=list)  # (path, source)
    accelerate_refs: list[tuple[str, str]] = field(default_factory=list)  # accelerate configs
    config_modules: list[tuple[str, str, str]] = field(default_factory=list)  # (framework, file, source)
    problems: list[tuple[str, str]] = field(default_factory=list)  # (source, message)
    undecided: dict = field(default_factory=dict)  # the script's undecided branches (Script.undecided)
    trainer_configs: list[tuple[str, str]] = field(default_factory=list)  # (YAML path, source)
    defaulted: set[str] = field(default_factory=set)  # facts of launcher options left to their default


def _largest(text: str | None) -> int | None:
    """A whole number, or the largest of several (microsoft's PR-MoE gives --num-experts per
    layer group: "64 64 128")."""
    numbers = [_int(part) for part in (text or "").split()]
    return max(numbers) if numbers and None not in numbers else None


def _not_a_count(text: str | None) -> bool:
    """A whole number below 1 (0, -2) where a count must be: "0", or one of several."""
    return any(re.fullmatch(r"-?[0-9_]+", part) and int(part.replace("_", "") or "0") < 1
               for part in (text or "").split())


def _int(text: str | None) -> int | None:
    if text is None:
        return None
    text = text.replace("_", "")
    return int(text) if re.fullmatch(r"[0-9]+", text) else None


class _Reader:
    def __init__(self, text: str, file: str, resolve_source=None, decide=None) -> None:
        self.file = file
        self.script: Script = read_script(text, file, resolve_source, decide)
        self.out = LaunchRead(undecided=self.script.undecided)

    def src(self, f: Field | int) -> str:
        offset = f if isinstance(f, int) else f.offset
        name, line, col = self.script.location(offset)
        where = f"{name}:{line}:{col}"
        note = None if isinstance(f, int) else f.note
        return f"{where} ({note})" if note else where

    def fact(self, name: str, value: object, f: Field | int) -> None:
        if value is not None:
            self.out.facts[name] = Fact(value, self.src(f))

    def _choices(self, found, values: dict[str, Field], entry: int) -> None:
        """The choices of _CHOICES the arguments make: the meaning of the flag given, else the
        dialect's parser's default (a switch off, a choice's default), at the entry point."""
        for e in found.entries:
            if e.value in _CHOICES and not e.implied and e.flag in values:
                text = values[e.flag].text
                if e.switch:
                    self.fact(e.value, e.when, values[e.flag])
                elif text is not None:  # (a value known only at run time gives no fact)
                    self.fact(e.value, e.meaning(text.split() if e.nargs != 1 else [text]), values[e.flag])
        for e in found.entries:
            if e.value not in _CHOICES or e.value in self.out.facts or e.implied:
                continue
            if e.switch and isinstance(e.when, bool):
                self.fact(e.value, not e.when, entry)
            elif e.map and e.flag in found.catalogue:
                self.fact(e.value, e.meaning([str(found.catalogue.get(e.flag).default)]), entry)

    def read(self, text: str) -> LaunchRead:
        self.sbatch_header(text)
        for message_offset, message in self.script.problems:
            self.out.problems.append((self.src(message_offset), message))
        if self.script.cuts:
            self.fact("command_cuts", tuple((self.src(o), kind) for o, kind in self.script.cuts),
                      self.script.cuts[0][0])
        for command in self.script.commands:
            self.command(command)
        self.environment()
        self.world()
        return self.out

    # -- #SBATCH --------------------------------------------------------------------------------
    def sbatch_header(self, text: str, base: int = 0, first_line: int | None = None,
                      embedded: bool = False) -> None:
        """#SBATCH lines of the script (or of an `sbatch <<EOF` heredoc at ``base``)."""
        if not embedded:
            first = self.script.first_command_offset
            first_line = self.script.position(first)[0] if first is not None else None
        late: list[str] = []
        invalid: list[tuple[str, str]] = []
        options: dict[str, tuple[str | None, int]] = {}
        offset = base
        heredocs = [] if embedded else [(c.heredoc[1], c.heredoc[1] + len(c.heredoc[0]))
                                        for c in self.script.commands if c.heredoc]
        for number, line in enumerate(text.splitlines(keepends=True), start=1):
            stripped = line.strip()
            if any(start <= offset < end for start, end in heredocs):
                pass  # a heredoc body (e.g. an `sbatch <<EOF` job script) is read on its own
            elif stripped.startswith("#SBATCH"):
                if first_line is not None and number > first_line:
                    late.append(self.src(offset))
                else:
                    try:
                        words = shlex.split(stripped[len("#SBATCH"):], comments=True)
                    except ValueError:
                        words = stripped[len("#SBATCH"):].split()
                    if words and not words[0].startswith("-"):  # sbatch: "Invalid directive"
                        invalid.append((words[0], self.src(offset + line.index("#SBATCH"))))
                    # the options around a template's placeholder are what the user gets once
                    # it is filled in (GL308 reports the placeholder itself)
                    for name, value in _options(words, past_words=True):
                        options[name] = (value, offset + line.index("#SBATCH"))
            elif embedded and stripped and not stripped.startswith("#") and first_line is None:
                first_line = number  # the heredoc script's first command
            offset += len(line)
        if late and not embedded:
            self.out.facts["sbatch_late_lines"] = Fact(tuple(late), late[0])
        if invalid:
            self.out.facts["sbatch_invalid_directives"] = Fact(tuple(invalid), invalid[0][1])
        self.allocation(options, "sbatch")

    def allocation(self, options: dict[str, tuple[str | None, int]], prefix: str) -> None:
        def get(*names: str) -> tuple[str | None, int] | None:
            for n in names:
                if n in options:
                    return options[n]
            return None

        if options:
            first_offset = min(o for _, o in options.values())
            self.fact(f"{prefix}_options", tuple(sorted(options)), first_offset)
            given = self.out.facts.get(f"{prefix}_values")
            values = {**(given.value if given else {}), **{n: v for n, (v, _) in options.items()}}
            self.fact(f"{prefix}_values", values, first_offset)
        for names, fact in ((("-N", "--nodes"), "nodes"), (("--ntasks-per-node",), "ntasks_per_node"),
                            (("-n", "--ntasks"), "ntasks"), (("-c", "--cpus-per-task"), "cpus_per_task"),
                            (("--gpus-per-task",), "gpus_per_task")):
            got = get(*names)
            if got:
                value = got[0].split("-")[0] if got[0] and fact == "nodes" else got[0]
                self.fact(f"{prefix}_{fact}", self._count(names, options, _int(value)), got[1])
        gpus = get("--gpus-per-node")
        gres = get("--gres")
        if gpus:
            count = self._count(("--gpus-per-node",), options, _int((gpus[0] or "").rsplit(":", 1)[-1]))
            self.fact(f"{prefix}_gpus_per_node", count, gpus[1])
        elif gres and gres[0]:
            m = re.search(r"(?:^|,)gpu(?::[A-Za-z0-9_.-]+)?:([0-9]+)", gres[0])
            if m:
                self.fact(f"{prefix}_gpus_per_node", int(m.group(1)), gres[1])

    def _count(self, names: tuple[str, ...], options: dict[str, tuple[str | None, int]],
               number: int | None) -> int | None:
        """An allocation count (``--nodes=0``): 0 is not divided by; a GL901 note says so."""
        if number != 0:
            return number
        name = next(n for n in names if n in options)
        value, offset = options[name]
        why = f"{name}={value} is not a count (at least 1); what rests on it is not checked"
        self.out.problems.append((self.src(offset), why))
        return None

    # -- commands --------------------------------------------------------------------------------
    def command(self, command: Command) -> None:
        argv = command.argv
        words = [f.text for f in argv]
        if not words:
            return
        for op, target in command.redirects:
            if command.heredoc and op in (">", ">>") and target is not None and \
                    (target.text.endswith(".json") or "ds_config" in target.text):
                line = self.script.position(command.heredoc[1])[0]
                self.out.written_json.append((target.text, command.heredoc[0], line))
        if words[0] == "sed":
            self.sed(command)
            return
        if (words[0] or "").rsplit("/", 1)[-1] == "llamafactory-cli":
            self.llamafactory(command)
            return
        if words[0] == "sbatch":
            if command.heredoc is not None:  # sbatch <<EOF ... EOF: a job script inline
                self.sbatch_header(command.heredoc[0], command.heredoc[1], embedded=True)
            options = dict((n, (v, argv[0].offset)) for n, v in _options([w or "" for w in words[1:]]))
            if options:
                self.allocation(options, "sbatch")
            return
        k = 0
        srun_options: dict[str, tuple[str | None, int]] = {}
        while k < len(words):
            word = words[k] or ""
            base = word.rsplit("/", 1)[-1]
            if base == "srun":
                k += 1
                while k < len(words) and (words[k] or "").startswith("-"):
                    name, _, value = (words[k] or "").partition("=")
                    if not value and name in value_options() and k + 1 < len(words):
                        value = words[k + 1] or ""
                        k += 1
                    srun_options[name] = (value or None, argv[0].offset)
                    k += 1
                self.fact("srun_line", True, argv[0])
                continue
            if base in _PEEL:
                k += 1
                continue
            if base == "env":
                k += 1
                while k < len(words) and "=" in (words[k] or "") and not (words[k] or "").startswith("-"):
                    k += 1
                continue
            if base == "timeout":
                k += 2
                continue
            if base in ("bash", "sh") and shell_code([base, *words[k + 1:]], 0) is not None:
                if srun_options:
                    self.allocation(srun_options, "srun")
                return  # the string itself was evaluated as commands of its own
            break
        if srun_options:
            self.allocation(srun_options, "srun")
        rest = argv[k:]
        if not rest:
            return
        head = (rest[0].text or "").rsplit("/", 1)[-1]
        if head in UNREAD_LAUNCHERS:  # the launch is not read; its entry point's options still are
            self.out.facts.setdefault("unread_launcher", Fact(head, self.src(rest[0])))
            script = next((j for j, f in enumerate(rest) if (f.text or "").endswith(".py")), None)
            if script is not None:
                self.entry_args(rest[script + 1:], rest[script])
            return
        python = re.fullmatch(r"python[0-9.]*", head) is not None
        k = 1
        while python and k < len(rest) and (rest[k].text or "") in ("-u", "-O", "-OO", "-B", "-s", "-E"):
            k += 1  # interpreter flags before -m or the script
        module = rest[k + 1].text if python and k + 1 < len(rest) and rest[k].text == "-m" else None

        started = started_by(head, module)
        if started is not None:
            words = len(started.commands[0].split()) if not module else k + 2
            if started.name == "accelerate" and not (len(rest) > 1 and rest[1].text == "launch"):
                words = 1
            self.launcher(started, rest, words)
        elif python or (rest[0].text or "").endswith(".py"):
            entry = k if python else 0
            # one process per task, started by srun, or by mpirun through a per-rank shell (bash -c)
            unread = self.out.facts.get("unread_launcher")
            per_task = "srun_line" in self.out.facts or (unread is not None and unread.value in _MPI)
            self.fact("launcher", "srun" if per_task else "python", rest[0])
            if python:
                self.fact("python", rest[0].text, rest[0])
            self.entry_args(rest[entry + 1:], rest[min(entry, len(rest) - 1)])

    def llamafactory(self, command: Command) -> None:
        """``[FORCE_TORCHRUN=1 NNODES=N NPROC_PER_NODE=G] llamafactory-cli train CONFIG.yaml``:
        LLaMA-Factory starts torchrun with NNODES and NPROC_PER_NODE from the environment and
        reads everything else (the Trainer's arguments, the DeepSpeed config) from the YAML."""
        argv = command.argv
        if len(argv) < 3 or argv[1].text != "train" or not (argv[2].text or "").endswith((".yaml", ".yml")):
            return
        self.fact("launcher", "torchrun", argv[0])
        self.fact("entrypoint", argv[0].text, argv[0])
        for name, fact in (("NNODES", "launcher_nodes"), ("NPROC_PER_NODE", "procs_per_node")):
            given = command.env.get(name)
            if given is None and name in self.script.variables and self.script.variables[name].exported:
                given = self.script.variables[name].scalar()
            if given is not None:
                self.fact(fact, _int(given.text), given)
        self.out.trainer_configs.append((argv[2].text, self.src(argv[2])))

    def sed(self, command: Command) -> None:
        """``sed "s/PLACEHOLDER/$VALUE/" TEMPLATE [| sed ...] > CONFIG``: literal substitutions
        filling a config template (Megatron-DeepSpeed's examples), kept so the config is read as
        it will be written. A chain of piped seds adds to the one it follows."""
        words = [f.text or "" for f in command.argv[1:]]
        scripts, files, k = [], [], 0
        while k < len(words):
            if words[k] in ("-e", "--expression") and k + 1 < len(words):
                scripts.append(words[k + 1])
                k += 2
                continue
            if words[k].startswith("-"):
                if "i" in words[k][1:] and not words[k].startswith("--"):
                    return  # in place: the file is rewritten, not written from a template
                k += 1
                continue
            (files if scripts else scripts).append(words[k])
            k += 1
        substitutions = [pair for text in scripts for pair in _substitutions(text)]
        template = files[0] if files else next((t.text for op, t in command.redirects
                                               if op == "<" and t is not None), None)
        output = next((t.text for op, t in command.redirects if op in (">", ">|") and t is not None), None)
        where = self.src(command.argv[0])
        if command.piped and self.out.filled and self.out.filled[-1][0] is None:
            _, template, earlier, where = self.out.filled.pop()
            substitutions = earlier + substitutions
        elif template is None or UNKNOWN in template:
            return
        self.out.filled.append((output, template, substitutions, where))

    def launcher(self, started, argv: list[Field], start: int) -> None:
        """A launcher's own options from ``argv[start]`` on (any spelling its parser accepts; the
        facts of launchers.yaml), then the entry point and its arguments."""
        self.fact("launcher", started.name, argv[0])
        k, given = start, set()
        while k < len(argv) and (argv[k].text or "").startswith("-"):
            name, eq, value = (argv[k].text or "").partition("=")
            value_field = argv[k]
            if not eq and started.takes_value(name) and k + 1 < len(argv):
                k += 1
                value_field, value = argv[k], argv[k].text
            k += 1
            option = started.read(name)
            if option is not None:
                given.add(option.option)
            if option is None or not value:
                continue
            number = _int(value)
            if option.range:
                low, _, high = value.partition(":")
                number = _int(low) if not high or high == low else None
            if number == 0 and option.fact:  # a count of 0 (nodes, processes, GPUs): not divided by
                why = f"{name} {value} is not a count (at least 1); what rests on it is not checked"
                self.out.problems.append((self.src(value_field), why))
                number = None
            for fact in option.fact:
                self.fact(fact, number, value_field)
            if option.ref == "accelerate":
                self.out.accelerate_refs.append((value, self.src(value_field)))
            elif option.ref == "deepspeed":
                self.out.json_refs.append((value, self.src(value_field)))
        # every launcher word is known: what it leaves out takes its parser's default
        if k < len(argv) and all(UNKNOWN not in (w.text or UNKNOWN) for w in argv[:k + 1]):
            self.defaults(started, argv[0], given)
        if k < len(argv):
            self.entry_args(argv[k + 1:], argv[k])

    def defaults(self, started, command: Field, given: set[str]) -> None:
        """The facts of options the command line leaves out, from the launcher parser's default
        when it is a count (torchrun's --nnodes 1:1 and --nproc-per-node 1; DeepSpeed's -1 means
        "from the hostfile" and gives none)."""
        for option in started.options:
            if option.option in given:
                continue
            default = started.catalogue.get(option.option).default
            low, _, high = str(default).partition(":")
            number = _int(low) if default is not None and high in ("", low) else None
            for fact in option.fact:
                if number and fact not in self.out.facts:
                    self.fact(fact, number, command)
                    # (an executor's PET_* variables come before torchrun's defaults)
                    self.out.defaulted.add(fact)

    def entry_args(self, args: list[Field], entry: Field) -> None:
        self.fact("entrypoint", entry.text, entry)
        self.fact("entry_argv", tuple(a.text for a in args), entry)
        self.fact("entry_argv_runtime", tuple(runtime_text(a) for a in args), entry)
        texts = [a.text for a in args]
        registry = registry_dialect_of(texts)
        if registry is not None:  # a config function and its overrides (torchtitan)
            facts = registry_facts(registry, texts)
            for name, (meaning, k) in facts.items():
                self.fact(name, meaning, args[k])
            self.fact("framework", registry.name, entry)
            module, function = facts.get("titan_module", (None, 0)), facts.get("titan_config", (None, 0))
            known = all(isinstance(w, str) and UNKNOWN not in w for w in (module[0], function[0]))
            if known and module[0] in registry_modules(registry.name):  # torchtitan's own function
                model, problems = registry_model(registry.name, module[0], function[0],
                                                 self.src(args[function[1]]))
                self.out.facts.update({k: v for k, v in model.items() if k not in self.out.facts})
                self.out.problems.extend(problems)
            elif isinstance(module[0], str) and UNKNOWN not in module[0]:  # the file --module names
                path = module[0].replace(".", "/") + ".py"
                self.out.config_modules.append((registry.name, path, self.src(args[module[1]])))
            return
        trainer_texts = trainer_words(texts)
        if trainer_texts is not None:  # TrainingArguments, each flag as its own name

            texts, found = trainer_texts, dialect("trainer")
        else:
            found = _dialect_of_words(texts)
        options, stray = split(texts, _arity_in(found))
        if stray and (texts[stray[0]] or "").endswith((".yaml", ".yml")) and stray[0] == 0:
            # `torchrun src/train.py config.yaml`: the Trainer's arguments in a YAML (LLaMA-Factory)
            self.out.trainer_configs.append((texts[0], self.src(args[0])))
        flags: dict[str, str] = {}
        values: dict[str, Field] = {}
        for option in options:
            given = option.texts(texts)
            where = args[option.values[0]] if option.values else args[option.index]
            flags[option.flag] = self.src(where)
            value = " ".join(p or "?" for p in given) if len(given) > 1 else (given[0] if given else None)
            values[option.flag] = Field(value, where.offset, where.note)
        if not flags:
            return
        self.out.facts["megatron_flags"] = Fact(flags, self.src(entry))
        self.out.facts["megatron_flag_values"] = Fact(
            {option.flag: tuple(None if t is None or UNKNOWN in t else t for t in option.texts(texts))
             for option in options if option.values}, self.src(entry))
        int_flags, switch_flags, hints = megatron_reading()
        megatron = trainer_texts is None and bool(hints & set(flags))
        read: set[str] = set()
        for flag, name in int_flags.items():  # the table's first spelling of a value wins
            if flag in values and megatron and name not in read:
                read.add(name)
                number = _largest(values[flag].text)
                if name in _COUNTS and _not_a_count(values[flag].text):  # not divided by: a note
                    why = (f"{flag} {values[flag].text} is not a count (at least 1); "
                           "what rests on it is not checked")
                    self.out.problems.append((self.src(values[flag]), why))
                    number = None
                self.fact(name, number, values[flag])
        for flag, name in switch_flags.items():
            if flag in values and megatron:
                self.fact(name, True, values[flag])
        if megatron:
            self.fact("megatron_dialect", found.name, entry)
        trainer = trainer_texts is not None
        if megatron or trainer:  # the precision as any Megatron dialect (or the Trainer) spells it

            for e in (all_entries() if megatron else dialect("trainer").entries):
                if e.value == "precision" and e.flag in values and not e.implied:
                    self.fact("precision", e.when if e.switch else e.meaning([values[e.flag].text or ""]),
                              values[e.flag])
        if megatron:
            self._choices(found, values, entry)
            for flag in ("sequence_parallel", "distributed_optimizer", "reset_attention_mask"):
                self.out.facts.setdefault(flag, Fact(False, self.src(entry)))
            for flag in ("--fp8-hybrid", "--fp8-e4m3"):  # older Transformer Engine spellings of FP8
                if flag in values:
                    self.fact("precision", "fp8", values[flag])
            if "--lr-warmup-fraction" in values:
                fraction = values["--lr-warmup-fraction"]
                self.fact("lr_warmup_fraction", fraction.text, fraction)
            if "--rampup-batch-size" in values and values["--rampup-batch-size"].text:
                ramp = [_int(p) for p in values["--rampup-batch-size"].text.split()]
                self.fact("rampup", tuple(ramp) if len(ramp) == 3 and None not in ramp else None,
                          values["--rampup-batch-size"])
            if "--step-batch-size-schedule" in values:
                field_ = values["--step-batch-size-schedule"]
                entries = step_schedule(field_.text or "")
                self.fact("batch_schedule", entries, field_)
                if entries and "--global-batch-size" not in values:
                    self.fact("global_batch_size", max(entries)[1], field_)
            framework = "megatron-deepspeed" if "--deepspeed" in values else "megatron-lm"
            self.fact("framework", framework, entry)
        if trainer:
            for flag, name in _trainer_reading().items():
                if flag in values:
                    self.fact(name, _int(values[flag].text), values[flag])
            self.out.facts.setdefault("precision", Fact("fp32", self.src(entry)))
            self.fact("trainer", True, entry)
            if "--fsdp" in values:
                self.fact("framework", "fsdp", values["--fsdp"])
            config = values.get("--deepspeed")
            if config is not None and config.text:  # TrainingArguments' --deepspeed PATH
                self.out.json_refs.append((config.text, self.src(config)))
                self.fact("framework", "deepspeed", config)
        for flag in ("--deepspeed_config", "--deepspeed-config"):
            if flag in values and values[flag].text:
                self.out.json_refs.append((values[flag].text, self.src(values[flag])))
                if not megatron:
                    self.fact("framework", "deepspeed", entry)

    # -- environment and derived values ----------------------------------------------------------
    def environment(self) -> None:
        var = self.script.variables.get("CUDA_DEVICE_MAX_CONNECTIONS")
        if var is not None and var.exported:
            value = var.scalar()
            self.fact("cuda_device_max_connections", value.text if value.text is not None else "?", value)
        else:
            for command in self.script.commands:
                if "CUDA_DEVICE_MAX_CONNECTIONS" in command.env:
                    f = command.env["CUDA_DEVICE_MAX_CONNECTIONS"]
                    self.fact("cuda_device_max_connections", f.text or "?", f)
        exported = [(var.offset, name, var.scalar().text) for name, var in self.script.variables.items()
                     if var.exported and not var.array]
        if exported:
            self.fact("exports", tuple((name, text) for _, name, text in sorted(exported)),
                      min(exported)[0])
            ascend = [offset for offset, name, _ in sorted(exported) if name.startswith(("HCCL_", "ASCEND_"))]
            self.fact("ascend", bool(ascend), ascend[0] if ascend else min(exported)[0])
        self.search_paths()
        used: dict[str, str] = {}
        for name, offset in _batch_shell_slurm_variables(self.script.text):
            used.setdefault(name, self.src(offset))
        if used:
            self.out.facts["slurm_variables"] = Fact(used, next(iter(used.values())))

    def search_paths(self) -> None:
        """The folders the script's Python may come from, as written (UNKNOWN for run-time parts):
        each ``cd`` target, then each PYTHONPATH entry; lint finds the parser the script runs
        there (lint/repository.py)."""
        found = [(c.argv[1].text, c.offset) for c in self.script.commands
                 if len(c.argv) == 2 and c.argv[0].text == "cd" and c.argv[1].text]
        var = self.script.variables.get("PYTHONPATH")
        if var is not None and var.scalar().text:
            found += [(part, var.offset) for part in var.scalar().text.split(":") if part.strip(UNKNOWN)]
        if found:
            self.fact("search_paths", tuple(dict.fromkeys(p for p, _ in found)), found[0][1])

    def world(self) -> None:
        f = self.out.facts
        launcher = f.get("launcher")
        nodes = f.get("sbatch_nodes") or f.get("srun_nodes")
        if "launcher_nodes" in f and launcher and launcher.value in ("torchrun", "deepspeed", "accelerate"):
            nodes = f["launcher_nodes"]
        if nodes:
            f.setdefault("nodes", nodes)
        if launcher and launcher.value in ("torchrun", "deepspeed") and "procs_per_node" in f and nodes:
            f["world_size"] = Fact(nodes.value * f["procs_per_node"].value, nodes.source)
        elif launcher and launcher.value == "accelerate":
            accelerate_world(f)
        elif launcher and launcher.value == "srun":
            tasks = f.get("srun_ntasks_per_node") or f.get("sbatch_ntasks_per_node")
            total = f.get("srun_ntasks") or f.get("sbatch_ntasks")
            if tasks and nodes:
                f["procs_per_node"] = tasks
                f["world_size"] = Fact(nodes.value * tasks.value, nodes.source)
            elif total:
                f["world_size"] = total
        pp = f.get("pp")
        if "layers_per_virtual_stage" in f and "num_layers" in f and "vpp" not in f:
            per_stage = f["num_layers"].value // (pp.value if pp else 1)
            n = f["layers_per_virtual_stage"].value
            if n and per_stage % n == 0:
                f["vpp"] = Fact(per_stage // n, f["layers_per_virtual_stage"].source)


def accelerate_world(f: dict[str, Fact]) -> None:
    """accelerate launch: the world is its num_processes (command line or config), spread over
    its machines."""
    world = f.get("accelerate_num_processes")
    if world is None or not isinstance(world.value, int):
        return
    f["world_size"] = world
    machines = f.get("launcher_nodes") or f.get("accelerate_num_machines") or f.get("nodes")
    if machines and isinstance(machines.value, int) and machines.value and world.value % machines.value == 0:
        f.setdefault("procs_per_node", Fact(world.value // machines.value, world.source))


def runtime_text(f: Field) -> str | None:
    """A word known only at run time as shell text with ${NAME} references, when that is all
    it holds ("$CKPT/run" from the environment -> "${CKPT}/run"); None otherwise."""
    if f.text is None or UNKNOWN not in f.text or f.text.count(UNKNOWN) != 1:
        return None
    m = re.fullmatch(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}? from the environment", f.note or "")
    if not m:
        return None
    text = f.text.replace(UNKNOWN, "${" + m.group(1) + "}")
    return text if re.fullmatch(r"([A-Za-z0-9_./:,=+@%~-]|\$\{[A-Za-z_][A-Za-z0-9_]*\})+", text) else None


def step_schedule(text: str) -> tuple[tuple[int, int], ...] | None:
    """Megatron's "THRESHOLD:BATCH ..." (space or comma separated; K/M/B/T decimal, read through a
    float as Megatron does); None when any entry is not statically known."""
    scale = {"": 1, "K": 10**3, "M": 10**6, "B": 10**9, "T": 10**12}
    entries = []
    for item in re.split(r"[\s,]+", text.strip()):
        m = re.fullmatch(r"([0-9]*\.?[0-9]+)([KMBT]?):([0-9]+)", item)
        if not m:
            return None
        entries.append((int(float(m.group(1)) * scale[m.group(2)]), int(m.group(3))))
    return tuple(entries) or None


def _batch_shell_slurm_variables(text: str) -> list[tuple[str, int]]:
    """$SLURM_* read by the batch shell itself: not in comments, not escaped (\\$), not inside
    single quotes (those are expanded later, by the shell of an srun task)."""
    found: list[tuple[str, int]] = []
    single = double = False
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\" and not single:
            i += 2
            continue
        if c == "'" and not double:
            single = not single
        elif c == '"' and not single:
            double = not double
        elif c == "#" and not single and not double and (i == 0 or text[i - 1] in " \t\n;"):
            end = text.find("\n", i)
            i = len(text) if end < 0 else end
            continue
        elif c == "$" and not single:
            m = re.match(r"\$\{?(SLURM_[A-Z_]+)", text[i:i + 64])
            if m:
                found.append((m.group(1), i))
        i += 1
    return found


def _options(words: list[str], past_words: bool = False) -> list[tuple[str, str | None]]:
    """``--opt=value``, ``--opt value`` and ``-N 2`` forms of sbatch/srun options, up to the first
    word that is not one (the job script on a command line); ``past_words``: read on past such
    words (an #SBATCH line's placeholder, ``#SBATCH <ACCOUNT> --nodes=16``)."""
    out: list[tuple[str, str | None]] = []
    k = 0
    while k < len(words):
        word = words[k]
        if not word.startswith("-"):
            if past_words:
                k += 1
                continue
            break
        name, eq, value = word.partition("=")
        if not eq and name in value_options() and k + 1 < len(words):
            value = words[k + 1]
            k += 1
        elif not eq and len(name) > 2 and not name.startswith("--") and name[:2] in value_options():
            name, value = name[:2], name[2:]  # -N2
        out.append((name, value if (eq or value) else None))
        k += 1
    return out


def read_launch(text: str, file: str, resolve_source=None, decide=None) -> LaunchRead:
    """``decide``: see readers.bash.read_script (one alternative of the undecided branches)."""
    return _Reader(text, file, resolve_source, decide).read(text)
