"""`zeroplan estimate`: resolve the inputs (zeroplan.inputs), run the core (run.py), render (table, report,
plot); `sweep` runs it over a grid. Calling this package runs the Python API's estimate."""

import sys as _sys
import types as _types


class _CallableModule(_types.ModuleType):
    """`zeroplan.estimate(...)` is the Python API (zeroplan.api.estimate) even once this package is imported:
    importing a subpackage makes it the attribute `zeroplan.estimate`, so the package itself is callable."""

    def __call__(self, *args, **kwargs):
        from zeroplan.estimate.api import estimate

        return estimate(*args, **kwargs)


_sys.modules[__name__].__class__ = _CallableModule
