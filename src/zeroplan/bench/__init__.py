"""`zeroplan bench`: measure real AllGather / ReduceScatter / AllReduce bandwidth with torch.distributed
and fit the α-β link model the estimator uses (see docs/bench.md).

Layout: config (validated options, no torch), worker (one rank's sweep, run through
zeroplan.distributed's launcher or in-process under torchrun), timing (one collective at one size),
topology (spans), result (the run and its fits on mean times), report (table/json/csv), runner (ties
them together). Importing this package does not import torch; only the rank code paths do.
"""
