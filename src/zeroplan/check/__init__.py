"""`zeroplan check`: lint DeepSpeed configs, zeroplan plan files and accelerate configs.

Rules carry stable ids (zeroplan.deepspeed.findings.RULES); config-only rules need nothing but the file,
memory and bucket rules also need the model and hardware (flags or a plan file). Entry point:
zeroplan.check.runner.check_files. Calling this package runs the Python API's check.
"""

import sys as _sys
import types as _types


class _CallableModule(_types.ModuleType):
    """`zeroplan.check(...)` is the Python API (zeroplan.api.check) even once this package is imported:
    importing a subpackage makes it the attribute `zeroplan.check`, so the package itself is callable."""

    def __call__(self, *args, **kwargs):
        from zeroplan.check.api import check

        return check(*args, **kwargs)


_sys.modules[__name__].__class__ = _CallableModule
