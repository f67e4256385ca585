"""The plan search: which layouts exist (space), the memory of many plans at once (batch_memory), and the
exhaustive search that ranks them (search)."""
