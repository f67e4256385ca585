"""Running N ranks of torch.distributed, shared by `bench` and `validate`; sharding a model, shared by
`validate` and `trace`.

Layout: launcher (spawn N local ranks of a worker module, watch their progress, always clean up; no
torch), child (the rank's side of that protocol: progress counter, lifeline, result file, one entry
point), rendezvous (who am I under torchrun/SLURM/our launcher, free ports, joining the group within
--timeout), devices (GPUs and the backend, found without importing torch), exchange (JSON between
ranks as tensors, no numpy), torch_import, sharding (a torch model's wrappers and optimizer for a ZeRO
stage, precision and recompute; torch imported inside its functions). Nothing here imports zeroplan.bench or zeroplan.validate.
"""
