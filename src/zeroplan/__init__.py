"""zeroplan: plan DeepSpeed ZeRO and 3D-parallel training runs.

Python API (docs/api.md): zeroplan.estimate(...), zeroplan.plan(...), zeroplan.check(...), each returning a
typed result whose to_dict() is the command's JSON document; bad input raises zeroplan.InputError. They load
on first use, so `import zeroplan` stays cheap (the CLI imports this package for its version).
"""

__version__ = "0.1.0"

__all__ = ["__version__", "estimate", "plan", "check", "InputError", "RunFailed", "ZeroplanError"]


def __getattr__(name: str):
    if name in ("estimate", "check"):  # the subpackages, callable as the API functions
        import importlib

        return importlib.import_module(f"zeroplan.{name}")
    if name == "plan":
        from zeroplan.search.api import plan

        return plan
    if name in ("InputError", "RunFailed", "ZeroplanError"):
        from zeroplan.core import errors

        return getattr(errors, name)
    raise AttributeError(f"module 'zeroplan' has no attribute '{name}'")
