"""Static readers: launch files -> facts (values with file:line). Nothing read is executed.

Today they read what gen-launch generates (to check it before writing); the linter extends
them to hand-written scripts.
"""
