"""Estimates before a GPU is touched: parameter counts, per-GPU memory, FLOPs, step time, MFU and
time to train. Pure functions over numbers, so the planner can call
them for many candidate layouts."""
