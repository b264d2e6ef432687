"""Hostile and broken input: the linter reports what it could not read, and never hangs,
crashes or executes anything. Each case runs the real CLI in a subprocess with a time limit."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

CASES = {
    "binary.sh": b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 4,
    "latin1.sh": "GBS=64 # caf\xe9\n".encode("latin-1"),
    "huge.sh": b"# " + b"x" * (3 << 20) + b"\n",
    "unterminated_quote.sh": b'A="never closed\ntorchrun --nnodes 1 train.py\n',
    "unterminated_heredoc.sh": b"cat <<EOF > ds.json\n{\"train_batch_size\": 8\n",
    "unterminated_subst.sh": b"X=$(echo (((\n",
    "deep_parens.sh": b"X=" + b"$(" * 5000 + b"\n",
    "deep_braces.sh": b"X=" + b"${A:-" * 5000 + b"\n",
    "deep_arith.sh": b"X=$((" + b"(" * 5000 + b"1" + b")" * 5000 + b"))\n",
    "recursive_vars.sh": b"A=$B\nB=$A\nC=$((A+B))\ntorchrun --nnodes $A --nproc_per_node $B train.py\n",
    "doubling.sh": b"A=x\n" + b'A="$A$A"\n' * 40 + b"echo $A\n",
    "power.sh": b"X=$((9**9**9**9))\nY=$((1<<999999))\nZ=$((1/0))\n",
    "many_commands.sh": b"true\n" * 200_000,
    "eval_nest.sh": b"eval " * 2000 + b"'echo hi'\n",
    "bash_c_nest.sh": b"bash -c " * 500 + b"'echo hi'\n",
    "empty.sh": b"",
    "only_comment.sh": b"# nothing\n",
    "crlf.sh": b"#!/bin/bash\r\nGBS=64\r\ntorchrun --nnodes 1 --nproc_per_node 8 pretrain_gpt.py --micro-batch-size 1 --global-batch-size $GBS --num-layers 2\r\n",
    "bad.json": b'{"train_batch_size": 8, "train_batch_size": 16}',
    "deep.json": b"[" * 10000,
    "broken.json": b'{"train_batch_size": 8,,}',
}
UNREADABLE = {"binary.sh", "latin1.sh", "huge.sh", "bad.json", "deep.json", "broken.json"}


@pytest.mark.parametrize("command", ["lint", "import"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_hostile_input(tmp_path: Path, name: str, command: str) -> None:
    """lint and import read files the same way; import exits 0 (a spec) or 2 (nothing to import)."""
    path = tmp_path / name
    path.write_bytes(CASES[name])
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "generator", command, str(path)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60, check=False)
    elapsed = time.monotonic() - start
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode in ((0, 1, 2) if command == "lint" else (0, 2)), proc.stderr
    if name in UNREADABLE and command == "lint":  # a finding like any other: error, exit 1
        assert proc.returncode == 1 and f"{path}" in proc.stdout and "GL900 cannot read" in proc.stdout
    elif name in UNREADABLE:
        assert proc.returncode == 2 and f"{path}" in proc.stderr and "cannot read" in proc.stderr
    assert elapsed < 30
    assert not any(p.name.startswith("pwned") for p in tmp_path.iterdir())


def test_problems_are_located(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{\n  "train_batch_size": 8,\n  "train_batch_size": 16\n}\n')
    proc = subprocess.run([sys.executable, "-m", "generator", "lint", str(path)], capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 1
    assert f"{path}:3:3: GL900 cannot read: not readable as a DeepSpeed config: Duplicate keys" in proc.stdout


def test_one_unreadable_file_does_not_hide_the_others(tmp_path: Path) -> None:
    """A folder with a broken JSON, a sed template no script fills, a binary file and a script
    with a planted fault: the fault is reported, each unreadable file is a GL900 error, the
    template and a file the script names that is missing are GL901 notes, in every format
    (SARIF included); exit 1, not 2."""
    import json

    (tmp_path / "ds_config_TEMPLATE.json").write_text('{"train_batch_size": CONFIG_BATCH_SIZE}\n')
    (tmp_path / "broken.json").write_text('{"train_batch_size": 8,,}\n')
    (tmp_path / "blob.sh").write_bytes(b"\x7fELF\x00\x01")
    (tmp_path / "train.sh").write_text(
        "#!/bin/bash\n"
        "torchrun --nnodes 1 --nproc_per_node 8 pretrain_gpt.py --deepspeed \\\n"
        "  --deepspeed_config missing_ds.json --micro-batch-size 3 --global-batch-size 16 \\\n"
        "  --num-layers 4 --hidden-size 256 --num-attention-heads 4 --seq-length 128 \\\n"
        "  --max-position-embeddings 128\n")
    proc = subprocess.run([sys.executable, "-m", "generator", "lint", "-f", "sarif", str(tmp_path)],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 1, proc.stderr
    results = json.loads(proc.stdout)["runs"][0]["results"]
    got = {(r["ruleId"], r["level"], Path(r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]).name)
           for r in results}
    assert got == {("GL002", "error", "train.sh"), ("GL900", "error", "broken.json"),
                   ("GL901", "note", "ds_config_TEMPLATE.json"), ("GL900", "error", "blob.sh"),
                   ("GL903", "warning", "train.sh")}  # missing_ds.json: a relative path, nowhere


def test_missing_path_is_exit_2(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "generator", "lint", str(tmp_path / "nope.sh")],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 2 and "file not found" in proc.stderr
