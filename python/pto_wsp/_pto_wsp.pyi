"""Type stubs of the `pto_wsp._pto_wsp` extension module (crates/pto-wsp-py).

The public API wraps these classes (`pto_wsp.Module`, `pto_wsp.Program`, `pto_wsp.PlanProgram`);
they raise the classes of `pto_wsp.errors`.
"""

from os import PathLike
from typing import Any, Dict, List, Mapping, Optional, Union

__version__: str

BindValue = Union[int, float, bool, str, List[int]]

def tile_instructions() -> List[Dict[str, Any]]:
    """The tile instruction table: dicts of mnemonic, operands (kinds in order), shape (the
    rule's name) and doc."""

def backends() -> List[Dict[str, Any]]:
    """Every registered back end, in registration order: dicts of `name`, `targets` and
    `capabilities` (what `pto-wsp targets` lists)."""

def get_backend(name: str) -> Optional[Dict[str, Any]]:
    """The back end registered under `name` (its name or one of its targets), or `None`."""

class Module:
    """A pto-wsp module: the IR of a `.wsp` text."""

    @staticmethod
    def from_text(text: str, path: Optional[str] = None) -> "Module": ...
    @staticmethod
    def from_file(path: Union[str, "PathLike[str]"]) -> "Module": ...
    def to_text(self) -> str: ...
    @property
    def entry(self) -> Optional[str]: ...
    @property
    def tensors(self) -> List[str]: ...
    @property
    def plans(self) -> List[str]: ...
    def compile(
        self,
        target: str = "cpu_sim",
        threads: int = 0,
        device_gen: bool = False,
        debug_checks: bool = False,
        bind: Optional[Mapping[str, BindValue]] = None,
        trace: bool = False,
        coverage: bool = True,
    ) -> Union["Program", "PlanProgram"]: ...
    def emit(
        self, target: str, bind: Optional[Mapping[str, BindValue]] = None
    ) -> Union[bytes, Dict[str, bytes]]: ...
    def expand(
        self, bind: Optional[Mapping[str, BindValue]] = None, limit: Optional[int] = None
    ) -> List[Dict[str, Any]]: ...

class Program:
    """A compiled program (see `pto_wsp.Program`)."""

    def execute(self, **arrays: Any) -> Dict[str, Any]: ...
    def execute_async(self, **arrays: Any) -> None: ...
    def synchronize(self) -> Dict[str, Any]: ...
    def is_complete(self) -> bool: ...
    def is_running(self) -> bool: ...
    def write_trace(self, path: Union[str, "PathLike[str]"]) -> None: ...
    def tensor_info(self) -> List[Dict[str, Any]]: ...
    def read_tensor(self, name: str) -> bytes: ...
    @property
    def stats(self) -> Dict[str, Any]: ...
    @property
    def threads(self) -> int: ...
    @property
    def name(self) -> str: ...

class PlanProgram:
    """A compiled module of plans (see `pto_wsp.PlanProgram`)."""

    def execute(self, **arrays: Any) -> Dict[str, Any]: ...
    def tensor_info(self) -> List[Dict[str, Any]]: ...
    @property
    def stats(self) -> Dict[str, Any]: ...
    @property
    def threads(self) -> int: ...
    @property
    def name(self) -> str: ...
