"""Launchers' dialect (launchers.yaml): the options launch.sbatch gives torchrun, the DeepSpeed
launcher and accelerate launch, and what the readers take from a launcher's words in any
spelling its own parser accepts (catalogues/launcher-NAME.json)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from generator.dialects import Catalogue, catalogue
from generator.resources import read_yaml
from generator.values import value

_DIR = Path(__file__).resolve().parent


@value
class LauncherOption:
    """One option of a launcher's command line and the plan value it carries."""

    option: str
    shell: str | None = None  # None: a switch
    when: str | None = None
    fact: tuple[str, ...] = ()
    range: bool = False
    ref: str | None = None
    where: str | None = None  # slurm | pod: written only there (None: both)


@value
class Launcher:
    """A process launcher (torchrun, deepspeed, accelerate, ...): its options and commands."""

    name: str
    title: str
    catalogue: Catalogue
    commands: tuple[str, ...]
    modules: tuple[str, ...]
    per_node: tuple[LauncherOption, ...]
    options: tuple[LauncherOption, ...]
    pod_setup: tuple[str, ...] = ()  # shell lines a pod's launch.sh runs before it

    def written(self, framework: str, per_node: bool = False, where: str = "slurm") -> list[str]:
        """The options launch.sbatch (``where`` slurm) or a pod's launch.sh (pod) writes for a
        plan of ``framework``: ``--opt=value`` words."""
        return [o.option if o.shell is None else f"{o.option}={o.shell}"
                for o in (self.per_node if per_node else self.options)
                if o.when in (None, framework) and o.where in (None, where)]

    def takes_value(self, spelling: str) -> bool:
        """Whether the option takes a value (an option the parser does not define: no)."""
        option = self.catalogue.get(spelling)
        return option is not None and option.arity != 0

    def read(self, spelling: str) -> LauncherOption | None:
        """The table's option that ``spelling`` is (any alias of the same parser option)."""
        option = self.catalogue.get(spelling)
        if option is None:
            return None
        return next((o for o in self.per_node + self.options
                     if self.catalogue.get(o.option).dest == option.dest), None)


def _option(entry: dict) -> LauncherOption:
    return LauncherOption(**{**entry, "fact": tuple(entry.get("fact", ()))})


@cache
def launcher(name: str) -> Launcher:
    t = read_yaml(_DIR / "launchers.yaml")[name]
    return Launcher(name, t["title"], catalogue(t["catalogue"]), tuple(t["commands"]),
                    tuple(t.get("modules", ())), tuple(_option(e) for e in t.get("per_node", ())),
                    tuple(_option(e) for e in t["options"]), tuple(t.get("pod_setup", ())))


@cache
def launchers() -> tuple[Launcher, ...]:
    return tuple(launcher(name) for name in read_yaml(_DIR / "launchers.yaml"))


def started_by(head: str, module: str | None) -> Launcher | None:
    """The launcher a command starts: its first word (``torchrun``, ``accelerate``) or the
    module of ``python -m``."""
    for candidate in launchers():
        if (module and module in candidate.modules) or \
                any(head == command.split()[0] for command in candidate.commands):
            return candidate
    return None
