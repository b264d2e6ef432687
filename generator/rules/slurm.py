"""GL3xx: Slurm job rules (GL301-GL303 are the linter's contract)."""

from __future__ import annotations

from generator.rules.registry import rule
from generator.units import slurm_minutes


@rule("GL304", "container-options-without-image",
      "Container mounts or a container workdir need a container image.")
def container_without_image(container_image: str | None = None,
                            container_mounts: tuple[str, ...] | None = None,
                            container_workdir: str | None = None) -> str | None:
    """pyxis only applies --container-mounts and --container-workdir to a step that runs in a container
    (--container-image); without one they are silently ignored or rejected by srun. Fix: set
    slurm.container_image, or drop the other container options.

    Example: slurm.container_mounts without slurm.container_image."""
    if container_image or not (container_mounts or container_workdir):
        return None
    given = [n for n, v in (("container_mounts", container_mounts),
                            ("container_workdir", container_workdir)) if v]
    return f"{' and '.join(given)} given without container_image; set slurm.container_image or remove them"


@rule("GL305", "pattern-in-log-directory",
      "Slurm filename patterns (%j, %x, ...) belong in the file name, not in its folders.")
def pattern_in_log_directory(output: str | None = None, error: str | None = None) -> str | None:
    """Slurm opens --output/--error before the job starts and does not create folders, so a folder
    named with a per-job pattern never exists and the job fails to launch (JobLaunchFailure,
    "Could not open stdout file"). Fix: logs/%x-%j.out rather than logs/%j/out.

    Example: --output=logs/%j/out.txt."""
    bad = [p for p in (output, error) if p and "%" in p.rpartition("/")[0]]
    if not bad:
        return None
    return (f"{bad[0]} puts a Slurm pattern in a folder name; Slurm does not create folders: "
            "keep the patterns in the file name, e.g. logs/%x-%j.out")


@rule("GL307", "command-cut-short",
      "A comment inside a backslash-continued command, or a backslash followed by blanks, cuts it.")
def command_cut(command_cuts: tuple) -> str | None:
    """Backslash-newline joins the lines, and a comment then runs to the end of its line, so
    the newline after it ends the command: the options on the lines below never reach the
    program, and bash runs them as a command of their own (``--lr: command not found``). A
    backslash followed by spaces before the newline escapes a space instead: the newline ends
    the command there, or, inside a quoted argument string, the backslash becomes an argument
    of its own ("unrecognized arguments: \\"). Fix: move the commented-out option to the end
    of the command or out of it (comments are fine in an array), and delete the blanks after
    the backslash.

    Example: ``torchrun ... \\`` then ``  # --use-flash-attn \\`` then ``  --bf16``."""
    if not command_cuts:
        return None
    (where, kind), more = command_cuts[0], len(command_cuts) - 1
    what = ("a comment inside a backslash-continued command ends it; the options on the lines "
            "after it are not passed") if kind == "comment" else \
        "a backslash followed by blanks does not continue the line; the command ends there"
    return (what + (f" (and {more} more)" if more else ""), (), ("command_cuts", where))


@rule("GL308", "sbatch-invalid-directive",
      "An #SBATCH line must start with an option; sbatch refuses the whole script otherwise.")
def invalid_directive(sbatch_invalid_directives: tuple) -> str | None:
    """sbatch reads each ``#SBATCH`` line before the first command as options; a line whose
    first word is not one (a template's ``<ACCOUNT>`` left in, a stray word) stops the
    submission with ``sbatch: error: Invalid directive found in batch script: <ACCOUNT>``
    (Slurm 22.05, checked with ``sbatch --test-only`` on the test cluster). Fix: fill in or
    delete the placeholder; put comments on lines of their own (``## ...``).

    Example: ``#SBATCH <ACCOUNT> --nodes=512``."""
    if not sbatch_invalid_directives:
        return None
    word, where = sbatch_invalid_directives[0]
    return (f"sbatch refuses the script: {word!r} on an #SBATCH line is not an option (\"Invalid "
            "directive found in batch script\")", (), ("sbatch_invalid_directives", where))


def _duration(seconds: float) -> str:
    return f"{seconds / 86400:.1f} days" if seconds >= 2 * 86400 else f"{seconds / 3600:.1f} h"


@rule("GL309", "run-outlives-allocation-unsaved",
      "The run is estimated to take longer than the Slurm time limit and saves no checkpoints.",
      severity="warning")
def outlives_unsaved(train_seconds: float, time_limit_minutes: int,
                     checkpoint_dir: str | None = None) -> str | None:
    """Slurm ends the job at its time limit (--time); a run that needs more than one allocation
    continues only from a checkpoint, and without checkpoint.dir every allocation starts the run
    over. Fix: set checkpoint.dir (saved to and resumed from) and checkpoint.interval; the
    generated arguments then also exit and save before the limit (--exit-duration-in-mins).

    Example: Llama-3-70B estimated at 51 days with slurm.time 4-00:00:00 and no checkpoint."""
    limit = time_limit_minutes * 60
    if checkpoint_dir is not None or train_seconds <= limit:
        return None
    return (f"training is estimated at {_duration(train_seconds)} and slurm.time allows {_duration(limit)} "
            f"(≈{-(-train_seconds // limit):.0f} allocations), but nothing is saved: every allocation would "
            "start over; set checkpoint.dir and checkpoint.interval")


@rule("GL310", "checkpoint-interval-beyond-allocation",
      "Checkpoints are farther apart than one allocation lasts.", severity="warning")
def interval_beyond_allocation(save_interval: int, step_time_s: float, time_limit_minutes: int) -> str | None:
    """With save_interval × step time beyond the time limit, no periodic checkpoint is written in
    an allocation: only the save at the exit before the limit keeps its progress, and a crash or a
    failed node loses all of it. Fix: a checkpoint.interval whose steps fit in the allocation
    several times.

    Example: checkpoint.interval 5000 at 6.3 s per step (8.8 h) with slurm.time 04:00:00."""
    between = save_interval * step_time_s
    limit = time_limit_minutes * 60
    if between <= limit:
        return None
    fits = max(1, int(limit / 4 / step_time_s))
    return (f"checkpoint.interval {save_interval:,} steps × {step_time_s:.2f} s = {_duration(between)}, "
            f"more than the {_duration(limit)} allocation: only the exit before the limit saves, a crash "
            f"loses the allocation; use at most {fits:,} (four checkpoints per allocation)")


# folders that live on one node: another node (or the next allocation) does not see them
_NODE_LOCAL = ("/tmp", "/var/tmp", "/dev/shm", "/local", "/scratch/local", "/raid/local", "/localscratch",
               "/mnt/local", "${TMPDIR}", "${SLURM_TMPDIR}", "${LOCAL_SCRATCH}", "${LOCALSCRATCH}")


@rule("GL311", "checkpoint-on-node-local-storage",
      "The checkpoint folder is on storage only one node sees.", severity="warning")
def node_local_checkpoint(checkpoint_dir: str) -> str | None:
    """Every rank writes its part of a checkpoint under checkpoint.dir, and a resumed or requeued
    job loads it, usually on other nodes: a node-local folder (/tmp, /dev/shm, $TMPDIR, local
    scratch) leaves each node with a fragment, and the next allocation finds none. Fix: a folder
    on a shared file system (Lustre, GPFS, NFS) that every node mounts.

    Example: checkpoint.dir /tmp/ckpt on 16 nodes."""
    text = str(checkpoint_dir)
    local = next((p for p in _NODE_LOCAL if text == p or text.startswith(p + "/")), None)
    if local is None:
        return None
    return (f"checkpoint.dir {text} is under {local}, which only one node sees: the ranks of other nodes "
            "write elsewhere and a resumed job finds no whole checkpoint; use a shared file system")


@rule("GL314", "time-limit-beyond-partition",
      "The job's time limit exceeds its partition's maximum.")
def beyond_partition(slurm_time: str, partition_max_time: str) -> str | None:
    """A job whose --time exceeds the partition's MaxTime never runs: sbatch refuses it, or (with
    EnforcePartLimits=NO) it pends for ever with the reason PartitionTimeLimit. Fix: slurm.time
    at most the partition's maximum; a run longer than that is generated as a chain of jobs that
    resume from the checkpoint (checkpoint.dir), so nothing is lost.

    Example: slurm.time 7-00:00:00 on a partition whose max_time is 2-00:00:00."""
    asked, allowed = slurm_minutes(slurm_time), slurm_minutes(partition_max_time)
    if allowed is None or (asked is not None and asked <= allowed):
        return None
    return (f"slurm.time {slurm_time} exceeds the partition's maximum {partition_max_time}: the job would "
            f"never start; set slurm.time: {partition_max_time} (a longer run is chained over allocations "
            "that resume from checkpoint.dir)")


@rule("GL315", "checkpoint-not-mounted-in-container",
      "The checkpoint folder is not mounted into the container.", severity="warning")
def checkpoint_not_mounted(checkpoint_dir: str, container_image: str,
                           container_mounts: tuple[str, ...] | None = None) -> str | None:
    """In a pyxis container, a folder that no --container-mounts entry brings in is the
    container's own: checkpoints written there vanish with the container when the job ends, and
    the next job resumes from nothing (the preflight's write test passes there too). Fix: mount
    the checkpoint folder, or one above it, in slurm.container_mounts (SRC:DST, DST the folder the
    run writes).

    Example: checkpoint.dir /lustre/ckpt/run with container_mounts [/data:/data]."""
    text = str(checkpoint_dir)
    if "${" in text or not text.startswith("/"):
        return None  # known at run time only, or relative to the container's workdir
    targets = [m.split(":")[1] if ":" in m else m for m in container_mounts or ()]
    if any(text == t or text.startswith(t.rstrip("/") + "/") for t in targets):
        return None
    listed = ", ".join(targets) or "none"
    return (f"checkpoint.dir {text} is not under any of slurm.container_mounts ({listed}): inside the "
            f"container it is the container's own folder, gone when the job ends; mount it, e.g. "
            f"{text}:{text}")
