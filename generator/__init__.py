"""gen-launch: one YAML run spec -> one consistent plan -> DeepSpeed, Megatron-LM and Slurm files."""

__version__ = "0.1.0"
