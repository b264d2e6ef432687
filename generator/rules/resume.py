"""Rules on a run that resumes another's checkpoint: the stages of one spec (each resumes the
previous stage's checkpoint), classified by generator/plan/resume.py as resume-check classifies two runs."""

from __future__ import annotations

from generator.rules.registry import rule


@rule("GL313", "stage-does-not-resume",
      "A stage resumes the previous stage's checkpoint; a change it cannot load is refused.")
def stage_does_not_resume(stage_resume: tuple) -> str | None:
    """The stages of a spec are one run: each loads the checkpoint the previous stage saved
    (checkpoint.dir). A change between stages that the checkpoint does not survive fails when
    the stage starts, after its time in the queue: another model shape, a tp or pp change of a
    torch-format checkpoint (Megatron asserts the sizes equal), a layout change of a distributed
    optimizer saved dp_reshardable (Megatron refuses it on load), a Megatron-DeepSpeed layout or
    ZeRO change without a universal checkpoint. Fix: keep the value across stages, or what the
    message names (checkpoint.format: torch_dist, checkpoint.reshardable: true from the first
    stage on, checkpoint.universal); `gen-launch resume-check` explains each change.

    Example: stage long changes parallelism.tp 2 -> 4 with checkpoint.format torch."""
    stage, previous, field, old, new, why, fix = stage_resume

    def named(text: str) -> str:  # resume-check's OLD and NEW are the two stages here
        return text.replace("OLD", f"stage {previous}").replace("NEW", f"stage {stage}")

    return (f"stage {stage} cannot resume stage {previous}'s checkpoint: {field} {old} -> {new}: "
            f"{named(why)}" + (f"; {named(fix)}" if fix else ""))
