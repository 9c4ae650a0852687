"""A local Modal-compatible server: the control plane and the task command router on one
grpclib port, built from the SDK's own generated base classes (``modal_proto``)."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from grpclib import GRPCError, Status
from modal_proto import api_grpc, api_pb2, task_command_router_grpc
from modal_proto import task_command_router_pb2 as tcr


def _log_unimplemented(cls: type) -> type:
    """Every RPC the class does not implement answers UNIMPLEMENTED and is logged."""

    def missing(name: str) -> Any:
        async def rpc(self: Any, stream: Any) -> None:
            print(f"modal local: unimplemented RPC {name}", file=sys.stderr, flush=True)
            raise GRPCError(Status.UNIMPLEMENTED, f"{name} is not implemented by the local Modal server")

        return rpc

    for name in sorted(getattr(cls, "__abstractmethods__", ())):
        setattr(cls, name, missing(name))
    cls.__abstractmethods__ = frozenset()  # type: ignore[attr-defined]
    return cls


@_log_unimplemented
class ControlPlane(api_grpc.ModalClientBase):
    pass


@_log_unimplemented
class CommandRouter(task_command_router_grpc.TaskCommandRouterBase):
    pass
