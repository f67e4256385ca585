"""One request evaluated: every option's memory, traffic, time and fit (estimate, option_estimate), the largest
micro-batch (micro_batch), the recommendation and its reason (recommend), and each figure's formula (explain)."""
