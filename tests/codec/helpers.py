"""Reading raw history: every payload in a history proto, with where it sits."""

from __future__ import annotations

from collections.abc import Iterator

from google.protobuf.message import Message
from temporalio.api.common.v1 import Payload
from temporalio.api.failure.v1 import Failure


def _children(msg: Message) -> Iterator[tuple[str, Message]]:
    for fd, value in msg.ListFields():
        if fd.type != fd.TYPE_MESSAGE:
            continue
        if fd.message_type.GetOptions().map_entry:
            if fd.message_type.fields_by_name["value"].type != fd.TYPE_MESSAGE:
                continue
            yield from ((f"{fd.name}[{k}]", v) for k, v in value.items())
        elif fd.is_repeated:
            yield from ((f"{fd.name}[{i}]", v) for i, v in enumerate(value))
        else:
            yield fd.name, value


def walk(msg: Message, path: str = "") -> Iterator[tuple[str, Message]]:
    """Every sub-message of ``msg`` (depth first) with its field path."""
    for name, child in _children(msg):
        where = f"{path}.{name}" if path else name
        yield where, child
        yield from walk(child, where)


def payloads(msg: Message) -> list[tuple[str, Payload]]:
    """Every ``Payload`` inside ``msg``."""
    return [(p, m) for p, m in walk(msg) if isinstance(m, Payload)]


def failures(msg: Message) -> list[tuple[str, Failure]]:
    """Every ``Failure`` inside ``msg``."""
    return [(p, m) for p, m in walk(msg) if isinstance(m, Failure)]
