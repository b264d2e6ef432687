"""What the linter could not read, reported as findings like any other (every output format,
SARIF included): a whole file (GL900, an error: none of its checks ran), a reading stopped at the
reader's bounds (GL902, an error: the rest was not checked) or a part of a run (GL901, a note:
the values that part would give are not checked), or a file the launch names that exists nowhere
(GL903, a warning: the run would fail to open it)."""

from __future__ import annotations

from generator.rules.registry import rule


@rule("GL900", "unreadable-file", "A launch file could not be read; none of its checks ran.")
def unreadable(unreadable_file: str) -> str | None:
    """A file given or found in a folder that is binary, not UTF-8, larger than the reader's
    bound, not valid JSON (for a DeepSpeed config) or not a valid spec. The other files are still
    linted; the run exits 1, as for any error (exit 2 is for usage errors, such as a path that
    does not exist). Fix: the file, or leave it out of the paths linted (or ``--ignore GL900``).

    Example: a ``ds_config_TEMPLATE.json`` with ``"train_batch_size": CONFIG_BATCH_SIZE``."""
    return f"cannot read: {unreadable_file}"


@rule("GL901", "not-checked", "Part of a launch could not be read statically; its values are not checked.",
      severity="note")
def not_checked(not_checked: str) -> str | None:
    """The linter reads scripts without running them: a config file the script names that is not
    there, a shell construct it does not follow, or a script larger than its budget leaves the
    values that part would give unknown, and the rules that need them do not run. Fix: nothing
    is wrong with the script for that; lint the named file too, or write the value literally.

    Example: ``--deepspeed_config ${CONFIG_DIR}/ds.json`` with no ds.json beside the script."""
    return f"not checked: {not_checked}"


@rule("GL902", "reading-stopped",
      "The reader stopped inside a launch file at its bounds; the rest was not checked.")
def stopped(reading_stopped: str) -> str | None:
    """The linter reads a script within bounds (commands run, bytes in a value, elements in an
    array, depth of nested expansions) so that no input makes it hang or eat memory. A script
    beyond them is read up to where it stopped and the run exits 1: the values after that point
    are unknown, and a clean report would say more than was checked. Fix: nothing a real launch
    needs comes near the bounds; a generated or obfuscated script is best linted from the file
    that generates it (or ``--ignore GL902``).

    Example: ``A=("${A[@]}" "${A[@]}")`` repeated twenty times (a million elements)."""
    return reading_stopped


@rule("GL903", "named-file-missing", "A config file the launch names exists nowhere in its repository.",
      severity="warning")
def named_file_missing(named_file_missing: str) -> str | None:
    """A path the script writes out in full (``--deepspeed_config configs/ds_z3.json``,
    ``--config_file accelerate/fsdp.yaml``), looked for where the script runs it: from the
    repository root (the git top level, or the folder the script ``cd``s into), then beside the
    script — never from the folder lint happens to run in. Not there, and not written by the
    script itself, the job fails to open it at start-up. A path with run-time parts
    (``${CONFIG_DIR}/ds.json``) or an absolute path outside the repository (a cluster's shared
    file system) is only "not checked" (GL901). Fix: the path, or commit the file.

    Example: ``--deepspeed_config ds_configs/zero2.json`` in a repository with ``ds_config/``."""
    return named_file_missing
