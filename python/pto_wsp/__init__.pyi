"""Type stubs of `pto_wsp`: the extension's names (`_pto_wsp.pyi`) and the Python front end's
(typed inline in its modules)."""

from ._pto_wsp import (
    CompileError as CompileError,
    Module as Module,
    PlanProgram as PlanProgram,
    Program as Program,
    PtoWspError as PtoWspError,
    RunError as RunError,
    ValidationError as ValidationError,
    __version__ as __version__,
)
from ._decl import (
    ANY as ANY,
    Dense as Dense,
    DenseDyn as DenseDyn,
    DType as DType,
    In as In,
    InOut as InOut,
    Kernel as Kernel,
    Out as Out,
    Ragged as Ragged,
    Region as Region,
    Slot as Slot,
    Sparse as Sparse,
    Symbol as Symbol,
    Tensor as Tensor,
    TensorType as TensorType,
    bf16 as bf16,
    bool_ as bool_,
    f16 as f16,
    f32 as f32,
    f64 as f64,
    i32 as i32,
    i64 as i64,
    kernel as kernel,
    span as span,
    u8 as u8,
    u32 as u32,
    u64_t as u64_t,
)
from ._trace import (
    Channel as Channel,
    P as P,
    Pipeline as Pipeline,
    Process as Process,
    Workload as Workload,
    call as call,
    combine as combine,
    connect as connect,
    pipeline as pipeline,
    process as process,
    sequential as sequential,
    workload as workload,
)
from ._schedule import (
    Deps as Deps,
    DispatchPolicy as DispatchPolicy,
    Pools as Pools,
    ReadyPolicy as ReadyPolicy,
    Schedule as Schedule,
    StartPolicy as StartPolicy,
    TimingPolicy as TimingPolicy,
    TracePolicy as TracePolicy,
)
from ._expr import (
    Expr as Expr,
    max_ as max_,
    min_ as min_,
    u64 as u64,
    where as where,
)
from ._module import (
    BuiltModule as BuiltModule,
    BuiltProgram as BuiltProgram,
    build as build,
)
