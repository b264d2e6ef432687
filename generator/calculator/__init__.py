"""The calculator: a spec resolved into its one plan (plan/), estimated (estimate/) and checked
by the rules (rules/) and against its dialect. It sits above those three, which do not import
it: resolve.py, dialect.py."""
