"""Standard workloads (model + synthetic data + loss), one file each, registered by name.

import workloads
workloads.names()                              # ['mlp', ...]
w = workloads.create("mlp", size="tiny")
"""

from harness.protocols import Registry, Workload

REGISTRY: Registry[Workload] = Registry("workload", __name__)
register = REGISTRY.register
names = REGISTRY.names
create = REGISTRY.create
entry = REGISTRY.entry
