"""Which strategy to book on a cluster: each strategy ranked by its predicted step or its floor (`ranked`), the
fastest of what fits one GPU per GPU count (`choice`), never one that failed parity in the run (`parity`), and
that choice said as a table (`choice_table`)."""
