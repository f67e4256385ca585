"""The model: what is trained. Its parameter count and shape (spec), exact counts of Hugging Face families read
from a config.json (families), and the parameters each pipeline stage holds (pipeline_stages)."""
