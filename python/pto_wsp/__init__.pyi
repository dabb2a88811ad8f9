from ._pto_wsp import (
    CompileError as CompileError,
    Module as Module,
    Program as Program,
    PtoWspError as PtoWspError,
    RunError as RunError,
    ValidationError as ValidationError,
    __version__ as __version__,
)
