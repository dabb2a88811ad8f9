"""pto-wsp from Python: workloads and schedules written in Python (or in the ``.wsp`` text
format), compiled and run on the CPU simulation with numpy arrays read and written in place.

>>> from pto_wsp import *
>>> M = Symbol(bind=256)                                          # doctest: +SKIP
>>> A = Tensor(f32[M, 128])                                       # doctest: +SKIP
>>> MT = DenseDyn(M // 16)                                        # doctest: +SKIP
>>> @kernel(pool="vector", alias="relu")
... def act(x: In[f32[16, 128]], y: Out[f32[16, 128]]): ...       # doctest: +SKIP
>>> @workload
... def main():
...     for i in P(MT):
...         act(A[i * 16:(i + 1) * 16, :], B[i * 16:(i + 1) * 16, :])  # doctest: +SKIP
>>> program = main.task_graph(deps=Deps.exact()).compile(threads=2)   # doctest: +SKIP

See docs/PYTHON.md for a walkthrough.
"""

from ._pto_wsp import (
    CompileError,
    Module,
    PlanProgram,
    Program,
    PtoWspError,
    RunError,
    ValidationError,
    __version__,
    backends,
    get_backend,
)
from ._expr import Expr, max_, min_, u64, where
from ._decl import (
    ANY,
    Dense,
    DenseDyn,
    DType,
    In,
    InOut,
    Kernel,
    Out,
    Ragged,
    Region,
    Slot,
    Sparse,
    Symbol,
    Tensor,
    TensorType,
    bf16,
    bool_,
    f16,
    f32,
    f64,
    i32,
    i64,
    kernel,
    span,
    u8,
    u32,
    u64_t,
)
from ._trace import (
    Channel,
    P,
    Pipeline,
    Process,
    Workload,
    call,
    combine,
    connect,
    pipeline,
    process,
    sequential,
    workload,
)
from ._schedule import (
    Deps,
    DispatchPolicy,
    Pools,
    ReadyPolicy,
    Schedule,
    StartPolicy,
    TimingPolicy,
    TracePolicy,
)
from ._module import BuiltModule, BuiltProgram, build

__all__ = [
    "ANY",
    "BuiltModule",
    "BuiltProgram",
    "Channel",
    "CompileError",
    "Dense",
    "DenseDyn",
    "Deps",
    "DispatchPolicy",
    "DType",
    "Expr",
    "In",
    "InOut",
    "Kernel",
    "Module",
    "Out",
    "P",
    "Pipeline",
    "PlanProgram",
    "Pools",
    "Process",
    "Program",
    "PtoWspError",
    "Ragged",
    "ReadyPolicy",
    "Region",
    "RunError",
    "Schedule",
    "Slot",
    "Sparse",
    "StartPolicy",
    "Symbol",
    "Tensor",
    "TensorType",
    "TimingPolicy",
    "TracePolicy",
    "ValidationError",
    "Workload",
    "__version__",
    "backends",
    "bf16",
    "bool_",
    "build",
    "call",
    "combine",
    "connect",
    "f16",
    "f32",
    "f64",
    "get_backend",
    "i32",
    "i64",
    "kernel",
    "max_",
    "min_",
    "pipeline",
    "process",
    "sequential",
    "span",
    "u8",
    "u32",
    "u64",
    "u64_t",
    "where",
    "workload",
]
