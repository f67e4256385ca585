"""What each GPU and host holds: model states (paper convention and as frameworks partition them), DeepSpeed's
and torch's buffers, activations, DeepSpeed's own estimators, and the memory budget that decides what fits."""
