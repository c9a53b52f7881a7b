"""The sharded strategies' step models: ZeRO-1's (`zero`) and FSDP2's (`fsdp`), each checked against a run's rows, and
their own costs as a cluster prediction takes them (`own_costs`)."""
