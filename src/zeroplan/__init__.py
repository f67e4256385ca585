"""zeroplan: plan DeepSpeed ZeRO and 3D-parallel training runs."""

__version__ = "0.1.0"
