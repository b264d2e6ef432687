"""Print start-up and throughput figures (a benchmark prints numbers; tests never time).

    python benchmarks/bench.py
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "samples" / "seed-pretrain-256.yaml"


def _environment() -> dict[str, str]:
    """This environment, writing bytecode: an installed package runs from its .pyc files, so a
    start-up figure without them (PYTHONDONTWRITEBYTECODE set) would time the compiler."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def walls(commands: dict[str, list[str]], rounds: int = 21) -> dict[str, list[float]]:
    """Each command's CPU time (user + system of the process), run in turns (one of each per
    round, after one warm-up run each). CPU time, not wall time: on a shared machine another
    tenant's load stretches wall times by up to 2x from one run to the next; a ratio is taken
    within each round (the commands ran side by side) and its median reported."""
    env = _environment()
    times: dict[str, list[float]] = {label: [] for label in commands}
    for warm_up, repeat in ((True, 1), (False, rounds)):
        for _ in range(repeat):
            for label, command in commands.items():
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                subprocess.run(command, check=True, capture_output=True, env=env)
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                if not warm_up:
                    times[label].append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return times


def main() -> None:
    python = sys.executable
    cli = [python, "-m", "generator"]
    # the bare import of the dependencies a generate uses (numpy is the layout search's only)
    deps = "import jinja2, jsonschema, typer, yaml"
    # what any typer command with generate's options costs before gen-launch's own code runs
    floor = (f"{deps}\nimport enum, pathlib\nfrom typing import Annotated\n"
             "class T(str, enum.Enum):\n    all = 'all'\n"
             "def generate(specs: Annotated[list[pathlib.Path], typer.Argument()],\n"
             "             target: Annotated[T, typer.Option('--target')] = T.all,\n"
             "             out: Annotated[pathlib.Path | None, typer.Option('--out')] = None,\n"
             "             quiet: Annotated[bool, typer.Option('--quiet')] = False,\n"
             "             overrides: Annotated[list[str] | None, typer.Option('--set')] = None): pass\n"
             "def other(): pass\n"
             "app = typer.Typer(add_completion=False)\napp.command()(generate)\napp.command()(other)\n"
             "app(['generate', 'x', '--out', 'y'])")
    commands = {
        "python -c pass": [python, "-c", "pass"],
        "import the dependencies": [python, "-c", deps],
        "a no-op typer command (same deps)": [python, "-c", floor],
        "gen-launch --version": [*cli, "--version"],
        "gen-launch explain (seed)": [*cli, "explain", str(SAMPLE)],
        "gen-launch generate --target all": [*cli, "generate", str(SAMPLE), "--out", "/tmp/gen-launch-bench"],
    }
    times = walls(commands)
    for label, seconds in times.items():
        print(f"{label + ':':40} {min(seconds) * 1000:7.1f} ms CPU (fastest of {len(seconds)}; "
              f"median {statistics.median(seconds) * 1000:.1f})")
    generate = times["gen-launch generate --target all"]
    for label in ("import the dependencies", "a no-op typer command (same deps)"):
        ratios = [g / other for g, other in zip(generate, times[label], strict=True)]
        print(f"{'generate / ' + label.split(' (')[0] + ':':40} {statistics.median(ratios):7.2f} x "
              f"(median of the rounds' paired ratios; fastest runs' {min(generate) / min(times[label]):.2f})")

    sys.path.insert(0, str(ROOT))
    from generator.artifacts import render_all
    from generator.calculator.resolve import resolve
    from generator.run import load_spec

    # specs with auto fields run the layout search when loaded: bench_autoplan.py measures it
    samples = [s for s in sorted((ROOT / "samples").glob("*.yaml")) if ": auto" not in s.read_text()]
    specs = [load_spec(s) for s in samples]
    render_all(resolve(specs[0]))  # warm the template cache
    rounds = 200
    start = time.perf_counter()
    for _ in range(rounds):
        for s in samples:
            load_spec(s)
    load_rate = rounds * len(samples) / (time.perf_counter() - start)
    start = time.perf_counter()
    for _ in range(rounds):
        for spec in specs:
            resolve(spec)
    resolve_rate = rounds * len(specs) / (time.perf_counter() - start)
    start = time.perf_counter()
    for _ in range(rounds):
        for spec in specs:
            render_all(resolve(spec))
    render_rate = rounds * len(specs) / (time.perf_counter() - start)
    print(f"{'load + schema-check a spec:':40} {load_rate:7.0f} /s")
    print(f"{'resolve a plan (all rules):':40} {resolve_rate:7.0f} /s")
    print(f"{'resolve + render + read back:':40} {render_rate:7.0f} /s")


if __name__ == "__main__":
    main()
