"""Entry point of the made-up fork (gen-launch's tests): its model code reads the switch."""

from megatron.arguments import parse_args


def add_task_args(parser):
    group = parser.add_argument_group(title="task")
    group.add_argument("--eval-tasks", nargs="+", default=None)
    return parser


if __name__ == "__main__":
    args = parse_args(extra_args_provider=add_task_args)
    attention = "flash" if args.use_flash_attn else "core"
