"""A fine-tuning entry point with its own argparse parser (written for gen-launch's tests)."""

import argparse


def parse():
    parser = argparse.ArgumentParser(description="supervised fine-tuning")
    parser.add_argument("--model_path", type=str, required=True)
    parser.add_argument("--microbatch_size", type=int, default=1)
    parser.add_argument("--plugin", choices=["ddp", "zero2", "gemini"], default="zero2")
    parser.add_argument("--lora_config", type=str, default=None)
    return parser.parse_args()


if __name__ == "__main__":
    args = parse()
