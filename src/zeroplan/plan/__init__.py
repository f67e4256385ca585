"""`zeroplan plan` and `zeroplan sweep`: resolve inputs, run the core search, and write what it found.

The math lives in zeroplan.core (search, step_time, plan_space, plan_memory, plan_comm); this package
turns flags into a core request, runs it with a progress bar, and formats the results.
"""
