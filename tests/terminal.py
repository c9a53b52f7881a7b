"""A terminal stand-in for the console's tests: a text stream that says it is a terminal, so that what ddpbench
writes in place there (a bar, a status rewritten, a line wiped) is written to it."""

from __future__ import annotations

import io


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True
