"""`gen-launch lint`: read existing launch scripts and DeepSpeed JSON statically, reconstruct the
run they imply, and report every inconsistency with the same rules the generator uses."""
