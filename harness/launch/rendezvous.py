"""How the nodes of a launch find each other, and the one-node rendezvous every single-node launch uses.

torchrun's `--standalone` runs its dynamic c10d rendezvous on one node: a random 0–0.3 s pause before
joining (to spread the nodes' first attempts over the store: there are no other nodes) and an event
per state change that walks the whole call stack (`inspect.stack()`, 18 calls: 0.35 s in a launch
forked from the run's zygote). Measured with cProfile on this machine, that was 0.46 of the agent's
0.77 s before its ranks started, paid by every launch (22 in a default `make bench`).

One node needs none of it: the agent is the only member. `ONE_NODE` is a rendezvous backend,
registered through torch elastic's public handler registry, that does what torchrun's static
rendezvous does for node 0 (a TCPStore on this node, shared with the ranks), on a port the system
picks (port 0): nothing to collide with a neighbouring launch. Several nodes keep torchrun's c10d
rendezvous.
"""

from __future__ import annotations

import dataclasses
import uuid

ONE_NODE = "ddpbench-one-node"
"""The backend's name in torchrun's `--rdzv-backend`; `harness.launch.agent` registers it."""
HOST = "127.0.0.1"


@dataclasses.dataclass(frozen=True)
class Rendezvous:
    """How the nodes of a launch find each other: one node (`ONE_NODE`, or `--standalone` on a torch
    without the handler API), or torchrun's c10d rendezvous at `endpoint` under `run_id`, this node
    being `node_rank` of `nnodes`."""

    nnodes: int = 1
    node_rank: int = 0
    endpoint: str | None = None
    run_id: str = ""

    def flags(self) -> list[str]:
        if self.nnodes == 1:
            if not one_node_supported():
                return ["--standalone"]
            return [f"--rdzv-backend={ONE_NODE}", f"--rdzv-endpoint={HOST}:0", f"--rdzv-id={uuid.uuid4()}"]
        return [
            f"--nnodes={self.nnodes}",
            f"--node-rank={self.node_rank}",
            "--rdzv-backend=c10d",
            f"--rdzv-endpoint={self.endpoint}",
            f"--rdzv-id={self.run_id}",
        ]


def one_node_supported() -> bool:
    """Whether this torch lets a handler give the ranks its store's address (torch ≥ 2.4:
    `RendezvousInfo.bootstrap_store_info`, pytorch PR 125743)."""
    try:
        from torch.distributed.elastic.rendezvous.api import RendezvousInfo, RendezvousStoreInfo  # noqa: F401
    except ImportError:
        return False
    return True


def register_one_node() -> None:
    """Make `ONE_NODE` a backend torchrun's `--rdzv-backend` finds (in the agent, before it parses)."""
    if not one_node_supported():
        return
    from torch.distributed.elastic.rendezvous import rendezvous_handler_registry

    rendezvous_handler_registry.register(ONE_NODE, _one_node_handler)


def _one_node_handler(params):
    """A handler for one node: torchrun's static rendezvous as node 0 runs it, on a port of the
    system's choosing, with that port given to the ranks."""
    from datetime import timedelta

    from torch.distributed import PrefixStore, TCPStore
    from torch.distributed.elastic.rendezvous.api import RendezvousInfo, RendezvousStoreInfo
    from torch.distributed.elastic.rendezvous.static_tcp_rendezvous import StaticTCPRendezvous

    if params.max_nodes != 1:
        raise ValueError(f"the {ONE_NODE} rendezvous serves one node, not {params.max_nodes}")

    class OneNode(StaticTCPRendezvous):
        def next_rendezvous(self) -> RendezvousInfo:
            if self._store is None:
                # multi_tenant: the ranks' init_process_group connects to this same server.
                self._store = TCPStore(HOST, 0, 1, True, self.timeout, multi_tenant=True)
            store_info = RendezvousStoreInfo(HOST, self._store.port)
            return RendezvousInfo(PrefixStore(self.run_id, self._store), 0, 1, store_info)

        def get_backend(self) -> str:
            return ONE_NODE

    timeout = int(params.config.get("timeout", timedelta(minutes=10).total_seconds()))
    return OneNode(HOST, 0, 0, 1, params.run_id, timeout)
