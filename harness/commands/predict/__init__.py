"""`predict`: the command, its input checks, a cluster's predictions and the full size's memory."""
