"""A hand-written torchtitan 0.3 config function: Llama 3.1 70B from torchtitan's own."""

from torchtitan.models.llama3 import model_registry
from torchtitan.models.llama3.config_registry import llama3_70b


def run():
    config = llama3_70b()
    config.model_spec = model_registry("70B")
    return config
