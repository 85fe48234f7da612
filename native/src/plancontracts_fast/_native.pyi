from collections.abc import Callable, Sequence
from typing import Final, TypeAlias, TypeVar, final

PROTOCOL: Final[int]

# None, or a tuple whose first item says the kind:
# (0, matcher), (1, item_node), (2, key_node, value_node),
# (3, {type: ((name, node), ...)}), (4, (node, ...)).
_Node: TypeAlias = tuple[object, ...] | None

def scan(data: bytes, max_depth: int, /) -> bool: ...

@final
class Dfa:
    def __new__(
        cls, accepting: Sequence[bool], transitions: Sequence[Sequence[tuple[int, int, int]]]
    ) -> Dfa: ...
    @property
    def states(self) -> int: ...
    def matches(self, text: str, /) -> bool: ...

def check(value: object, node: _Node, /) -> bool: ...

_T = TypeVar("_T")

def decode(
    data: bytes,
    max_depth: int,
    decoder: Callable[[bytes], object],
    node: _Node,
    unsure_errors: type[BaseException] | tuple[type[BaseException], ...],
    unsure: _T,
    /,
) -> object | _T: ...
