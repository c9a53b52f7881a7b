"""Data-parallel strategies, one file each, registered under a unique name.

import impls
impls.names()                                  # ['local', 'naive', 'stock', ...]
strategy = impls.create("stock", bucket_cap_mb=25)
"""

from harness.protocols import Registry, Strategy

REGISTRY: Registry[Strategy] = Registry("strategy", __name__)
register = REGISTRY.register
names = REGISTRY.names
create = REGISTRY.create
entry = REGISTRY.entry
