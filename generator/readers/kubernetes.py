"""An executor's file -> what lint reads in it, as it reads an sbatch script and its companions:

- a Kubernetes file (a TrainJob, PyTorchJob or JobSet, and the ConfigMaps it mounts): the files
  its pods mount, each ConfigMap key as {"FILE#CONFIGMAP/KEY": text} (where each lies in the
  file: ``embedded``, which lint's findings name), and facts for the script
  the container runs: the pods the job starts, the GPUs each asks for, the processes per node
  the job declares (TrainJob numProcPerNode, PyTorchJob nprocPerNode), whether /dev/shm is a
  Memory emptyDir; where the operator injects the node count (PET_NNODES), the launcher's node
  count and processes too, which torchrun reads when no flag says otherwise;
- a SkyPilot task: num_nodes and the accelerators per node, for the script its run starts.

Read as YAML data only (safe loader: nothing constructed, nothing run); every fact located
(file:line:col)."""

from __future__ import annotations

import posixpath
import re
from dataclasses import field
from typing import Any

import yaml

from generator.rules.registry import Fact
from generator.values import record, value

_JOBS = {"TrainJob", "PyTorchJob", "JobSet"}
_GPU = re.compile(r"gpu|Ascend|gaudi", re.I)  # the operators count resources whose name says gpu


@record
class ExecutorFile:
    """What lint reads in an executor's file."""

    file: str
    kind: str
    data: dict  # the job object (Kubernetes) or the task (SkyPilot), as data
    mounted: dict[str, str]  # the files the pods mount (ConfigMap keys), by lint name
    script: str | None  # the lint name of the script the container runs (None: not found)
    facts: dict[str, Fact]
    # where each embedded text lies in the file: lint name -> Embedded (its lines are the file's;
    # a column in it is the file's column less the scalar's indentation on that line)
    embedded: dict[str, Embedded] = field(default_factory=dict)


@value
class Embedded:
    """A text embedded in a YAML file (a ConfigMap key, a command string, a SkyPilot run)."""

    file: str
    what: str  # what it is, for the finding's note: "ConfigMap NAME, key KEY"
    columns: tuple[tuple[int, int], ...]  # (file line, columns before the text on it)

    def place(self, line: int, col: int) -> str:
        """file:line:col in the YAML file of line:col in the embedded text."""
        return f"{self.file}:{line}:{col + dict(self.columns).get(line, 0)} ({self.what})"


def read_executor_file(text: str, file: str) -> ExecutorFile | None:
    """The executor's file ``text`` read, or None when it is none (not YAML, no job, no task)."""
    try:
        nodes = list(yaml.compose_all(text, Loader=yaml.SafeLoader))
    except yaml.YAMLError:
        return None
    docs = [(node, _data(node)) for node in nodes if node is not None]
    jobs = [(n, d) for n, d in docs if isinstance(d, dict) and d.get("kind") in _JOBS]
    if jobs:
        return _kubernetes(file, text, docs, *jobs[0])
    if len(docs) == 1 and isinstance(docs[0][1], dict) and {"run", "num_nodes"} <= docs[0][1].keys():
        return _skypilot(file, text, *docs[0])
    return None


def _data(node: yaml.Node) -> Any:
    return yaml.SafeLoader(yaml.safe_dump(None)).construct_document(node)


def _where(file: str, node: yaml.Node, path: list) -> str:
    """file:line:col of the value at ``path`` under ``node`` (the nearest node that exists)."""
    for part in path:
        child = None
        if isinstance(node, yaml.MappingNode):
            child = next((v for k, v in node.value if k.value == part), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            child = node.value[part]
        if child is None:
            break
        node = child
    return f"{file}:{node.start_mark.line + 1}:{node.start_mark.column + 1}"


def _child(node: yaml.Node | None, key: str) -> yaml.Node | None:
    if isinstance(node, yaml.MappingNode):
        return next((v for k, v in node.value if k.value == key), None)
    return None


def _child_at(node: yaml.Node | None, path: list) -> yaml.Node | None:
    for part in path:
        if isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
        else:
            node = _child(node, part)
    return node


def _texts(node: yaml.Node | None) -> list[tuple[str, str, yaml.Node]]:
    """(key or index, text, node) of a mapping's or list's string values, each text preceded by
    blank lines so that its line numbers are the file's (a finding in it names the file's line)."""
    pairs = node.value if isinstance(node, yaml.MappingNode) else \
        [(yaml.ScalarNode("tag:yaml.org,2002:str", str(i)), v) for i, v in enumerate(node.value)] \
        if isinstance(node, yaml.SequenceNode) else []
    return [(key.value, _in_place(scalar), scalar) for key, scalar in pairs if _is_text(scalar)]


def _is_text(node: yaml.Node | None) -> bool:
    return isinstance(node, yaml.ScalarNode) and node.tag.endswith(":str")


def _in_place(scalar: yaml.ScalarNode) -> str:
    """A string scalar's text preceded by blank lines, so that its line numbers are the file's (a
    block scalar's text starts on the line after its indicator)."""
    return "\n" * (scalar.start_mark.line + (1 if scalar.style in ("|", ">") else 0)) + scalar.value


def _columns(node: yaml.ScalarNode, source: str) -> tuple[tuple[int, int], ...]:
    """(file line, columns before the text) for each line of a scalar's text: a block scalar's
    lines sit at its indentation (its first line's), a one-line plain or quoted scalar after its
    start and opening quote. Other multi-line flow scalars are folded: their first line only."""
    lines = source.splitlines()
    first = node.start_mark.line  # 0-based: the indicator's line for a block scalar
    if node.style in ("|", ">"):
        body = [i for i in range(first + 1, min(node.end_mark.line + 1, len(lines))) if lines[i].strip()]
        if not body:
            return ()
        indent = len(lines[body[0]]) - len(lines[body[0]].lstrip(" "))
        return tuple((i + 1, indent) for i in range(first + 1, node.end_mark.line + 1))
    return ((first + 1, node.start_mark.column + (1 if node.style in ("'", '"') else 0)),)


def dig(data: Any, path: list) -> Any:
    """The value at ``path`` (keys and list indices) in parsed YAML, None where it stops."""
    for part in path:
        if isinstance(data, dict):
            data = data.get(part)
        elif isinstance(data, list) and isinstance(part, int) and part < len(data):
            data = data[part]
        else:
            return None
    return data


def _kubernetes(file: str, source: str, docs: list, node: yaml.Node, job: dict) -> ExecutorFile:
    mounted: dict[str, str] = {}
    embedded: dict[str, Embedded] = {}
    mounts: dict[str, str] = {}  # ConfigMap name -> its lint folder
    for doc, data in docs:
        if isinstance(data, dict) and data.get("kind") == "ConfigMap":
            name = str(dig(data, ["metadata", "name"]) or "configmap")
            mounts[name] = f"{file}#{name}"
            for key, text, scalar in _texts(_child(doc, "data")):
                mounted[f"{file}#{name}/{key}"] = text
                embedded[f"{file}#{name}/{key}"] = Embedded(file, f"ConfigMap {name}, key {key}",
                                                            _columns(scalar, source))
    kind = job["kind"]
    pods, procs, pod_paths, container_path = _shape(kind, job)
    facts: dict[str, Fact] = {"executor_kind": Fact(kind, _where(file, node, ["kind"]))}
    if isinstance(pods[0], int):
        facts["pods"] = Fact(pods[0], _where(file, node, pods[1]))
    if procs[0] is not None:
        facts["pod_procs"] = Fact(procs[0], _where(file, node, procs[1]))
    container = dig(job, container_path) or {}
    gpus = [v for k, v in ((dig(container, ["resources", "limits"]) or {}) |
                           (dig(job, ["spec", "trainer", "resourcesPerNode", "limits"]) or {})).items()
            if _GPU.search(str(k))]
    if gpus and isinstance(gpus[0], int):
        facts["gpus_per_pod"] = Fact(gpus[0], _where(file, node, container_path))
    facts["shm_in_memory"] = Fact(_shm_in_memory(job, pod_paths), _where(file, node, pod_paths[0]))
    script = _script(job, container_path, mounts, pod_paths)
    inline = dig(job, [*container_path, "command"]) or []
    if script is None and len(inline) == 3 and inline[0] in ("bash", "sh", "/bin/bash", "/bin/sh") \
            and inline[1] == "-c" and isinstance(inline[2], str):  # the script written in the command
        script = f"{file}#command"
        texts = _texts(_child(_child_at(node, container_path), "command"))
        mounted[script] = texts[2][1] if len(texts) == 3 else inline[2]
        if len(texts) == 3:
            embedded[script] = Embedded(file, "the container's bash -c command",
                                        _columns(texts[2][2], source))
    if script is not None and kind in ("TrainJob", "PyTorchJob"):  # PET_NNODES, PET_NPROC_PER_NODE
        facts["injected_nodes"] = facts.get("pods")
        facts["injected_procs"] = facts.get("pod_procs")
    return ExecutorFile(file, kind, job, mounted, script, {k: v for k, v in facts.items() if v is not None},
                        embedded)


def _shape(kind: str, job: dict) -> tuple:
    """((pods, path), (procs per node, path), pod spec paths, the training container's path)."""
    if kind == "TrainJob":
        patch = ["spec", "runtimePatches", 0, "trainingRuntimeSpec", "template", "spec", "replicatedJobs", 0,
                 "template", "spec", "template", "spec"]
        return ((dig(job, ["spec", "trainer", "numNodes"]), ["spec", "trainer", "numNodes"]),
                (dig(job, ["spec", "trainer", "numProcPerNode"]), ["spec", "trainer", "numProcPerNode"]),
                [patch], ["spec", "trainer"])
    if kind == "PyTorchJob":
        specs = dig(job, ["spec", "pytorchReplicaSpecs"]) or {}
        roles = [r for r in ("Master", "Worker") if isinstance(specs.get(r), dict)]
        total = sum(specs[r].get("replicas", 1) for r in roles
                    if isinstance(specs[r].get("replicas", 1), int))
        nproc = dig(job, ["spec", "nprocPerNode"])
        paths = [["spec", "pytorchReplicaSpecs", r, "template", "spec"] for r in roles]
        return ((total, ["spec", "pytorchReplicaSpecs", roles[-1], "replicas"] if roles else ["spec"]),
                (int(nproc) if str(nproc).isdigit() else None, ["spec", "nprocPerNode"]),
                paths, [*paths[0], "containers", 0] if paths else ["spec"])
    rjobs = dig(job, ["spec", "replicatedJobs"]) or []
    total = sum((r.get("replicas", 1) or 1) * (dig(r, ["template", "spec", "parallelism"]) or 1)
                for r in rjobs if isinstance(r, dict))
    paths = [["spec", "replicatedJobs", i, "template", "spec", "template", "spec"] for i in range(len(rjobs))]
    return ((total, ["spec", "replicatedJobs", 0, "template", "spec", "parallelism"]), (None, []), paths,
            [*paths[0], "containers", 0] if paths else ["spec"])


def _shm_in_memory(job: dict, pod_paths: list) -> bool:
    """Whether every pod mounts a Memory emptyDir at /dev/shm."""
    for path in pod_paths:
        pod = dig(job, path) or {}
        memory = {v.get("name") for v in pod.get("volumes") or () if isinstance(v, dict)
                  and (dig(v, ["emptyDir", "medium"]) == "Memory")}
        mounted = [m for c in pod.get("containers") or () for m in c.get("volumeMounts") or ()
                   if isinstance(m, dict) and m.get("mountPath") == "/dev/shm" and m.get("name") in memory]
        if not mounted:
            return False
    return bool(pod_paths)


def _script(job: dict, container_path: list, mounts: dict[str, str], pod_paths: list) -> str | None:
    """The ConfigMap key the container's command runs (``bash /mount/KEY``), by lint name."""
    command = [*(dig(job, [*container_path, "command"]) or ()),
               *(dig(job, [*container_path, "args"]) or ())]
    volumes = {v.get("name"): dig(v, ["configMap", "name"]) for p in pod_paths
               for v in (dig(job, p) or {}).get("volumes") or () if isinstance(v, dict)}
    at = {m.get("mountPath"): volumes.get(m.get("name")) for p in pod_paths
          for c in (dig(job, p) or {}).get("containers") or () for m in c.get("volumeMounts") or ()
          if isinstance(m, dict)}
    for word in command:
        folder, key = posixpath.split(str(word))
        if at.get(folder) in mounts:
            return f"{mounts[at[folder]]}/{key}"
    return None


def _skypilot(file: str, source: str, node: yaml.Node, task: dict) -> ExecutorFile:
    facts: dict[str, Fact] = {"executor_kind": Fact("SkyPilot task", _where(file, node, ["run"]))}
    if isinstance(task.get("num_nodes"), int):
        facts["pods"] = Fact(task["num_nodes"], _where(file, node, ["num_nodes"]))
    accelerators = dig(task, ["resources", "accelerators"])
    count = (accelerators.rsplit(":", 1)[-1] if isinstance(accelerators, str) and ":" in accelerators else
             next(iter(accelerators.values()), None) if isinstance(accelerators, dict) else None)
    if str(count).isdigit():
        facts["gpus_per_pod"] = Fact(int(count), _where(file, node, ["resources", "accelerators"]))
    run = str(task.get("run") or "")
    script = f"{file}#run"
    mounts = {str(k).rstrip("/"): str(v) for k, v in (task.get("file_mounts") or {}).items()}
    words = run.split()
    if len(words) == 2 and words[0] == "bash":  # the run starts a mounted script
        folder, key = posixpath.split(words[1])
        if folder in mounts:
            script = posixpath.normpath(posixpath.join(posixpath.dirname(file), mounts[folder], key))
            return ExecutorFile(file, "SkyPilot task", task, {}, script, facts)
    scalar = _child(node, "run")
    if _is_text(scalar):  # its lines and columns the file's
        return ExecutorFile(file, "SkyPilot task", task, {script: _in_place(scalar)}, script, facts,
                            {script: Embedded(file, "the task's run", _columns(scalar, source))})
    return ExecutorFile(file, "SkyPilot task", task, {script: run}, script, facts)
