"""`predict`: the command, its input checks, a cluster's predictions and the full size's memory."""

# Defaults the parser states in its help: here, so that building the parser imports none of predict's modules.
DEFAULT_SIZES = "1KiB:16GiB"
DEFAULT_NODES = "1,2,4,8,16,64"
DEFAULT_COLLECTIVE_NODES = "1,2,4"
