"""How long a step takes: the machine's throughput (machine), every collective priced by one function
(collectives), data-parallel traffic per step (dp_traffic), data-parallel, offload and optimizer time
(dp_offload) and the step composed from them (step_time)."""
