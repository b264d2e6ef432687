from generator.cli import entrypoint

entrypoint()
