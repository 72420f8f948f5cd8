"""A cheap base for small record classes on the start-up path of ``machine good``.

``@dataclass`` generates its methods with ``exec`` when a module is imported:
0.8-1 ms a class on the benchmark machine, about 8 ms for the classes that
``machine good`` loads (bench/RESULTS.md holds its start-up to 1.5 times
``import pygit2``). A class lists its fields in ``__slots__``, writes its
``__init__``, and gets ``repr`` and ``==`` from here.
"""

from __future__ import annotations


class Plain:
    """``repr`` and ``==`` over the fields named in ``__slots__``."""

    __slots__: tuple[str, ...] = ()

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={getattr(self, k)!r}" for k in self.__slots__)
        return f"{type(self).__name__}({fields})"

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, k) == getattr(other, k) for k in self.__slots__)

    __hash__ = None  # type: ignore[assignment]  # mutable, as a dataclass is
