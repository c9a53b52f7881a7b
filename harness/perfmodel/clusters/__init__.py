"""Clusters you have not booked: their profiles (`cluster`, the built-ins beside it as TOML, each number with its
source), one collective's cost as NCCL's tuner sees it (`nccl`), and nccl-tests logs read and fitted (`nccltests`)."""
