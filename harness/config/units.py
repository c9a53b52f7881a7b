"""The units a person types: bandwidths, latencies and bucket caps, parsed into numbers (bytes/s, seconds, MiB)."""

from __future__ import annotations

import math
import re

from harness.protocols import ConfigError


def parse_bandwidth(text: str) -> float:
    """'90GB/s', '400Gb/s', '1.5 GB/s' → bytes per second (GB = 1e9, as nccl-tests reports busbw)."""
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([GMK])([Bb])(?:/s|ps)?\s*", text)
    if not match or float(match.group(1)) <= 0:
        raise ConfigError(f"--busbw {text!r} is not a bandwidth; give e.g. 90GB/s, 400Gb/s or 800MB/s")
    value = float(match.group(1)) * {"G": 1e9, "M": 1e6, "K": 1e3}[match.group(2)]
    return value / 8 if match.group(3) == "b" else value


def list_items(text: str, *, flag: str = "") -> tuple[str, ...]:
    """'a, b, c' as ('a', 'b', 'c'); '' and ' , ' as () (the flag then says it is empty). An empty item
    among others ('1,,5', 'stock,') is refused: a value typed there went missing, and running without it
    would answer another question (a sweep without its 25 MiB cap)."""
    items = [item.strip() for item in text.split(",")]
    given = tuple(item for item in items if item)
    if given and len(given) < len(items):
        named = f"{flag} " if flag else ""
        raise ConfigError(f"{named}{text!r} has an empty item between its commas; give each value once, as "
                          f"{','.join(given)}")  # fmt: skip
    return given


def parse_latency(text: str) -> float:
    """'30us', '0.5ms', '2e-5s' → seconds."""
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:e-?[0-9]+)?)\s*(us|µs|ms|ns|s)\s*", text)
    if not match:
        raise ConfigError(f"--latency {text!r} is not a time; give e.g. 30us, 0.2ms or 5e-6s")
    return float(match.group(1)) * {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0}[match.group(2)]


def parse_caps(text: str) -> list[float]:
    items = list_items(text, flag="--caps")
    try:
        caps = sorted({float(c) for c in items})
    except ValueError:
        caps = []
    if not caps or not all(math.isfinite(c) and c > 0 for c in caps):  # nan sorts anywhere: each is checked
        raise ConfigError(f"--caps {text!r} is not valid; give bucket caps in MiB > 0, e.g. 1,5,10,25,50,100")
    return caps


def check_cap(text: str, *, typed: str) -> float:
    """A bucket cap as typed ('--bucket-cap-mb \'0\''): a finite number of MiB > 0, else ConfigError in the words
    the strategies' own option gives (`registry.Option.check`), without importing them (and torch with them)."""
    try:
        cap = float(text)
    except ValueError:
        cap = math.nan
    if not (math.isfinite(cap) and cap > 0):
        raise ConfigError(f"{typed} is not valid; give a finite number (MiB > 0)")
    return cap


BYTE_UNITS = {"": 1, "B": 1, **{f"{prefix}{suffix}": 2 ** (10 * power) for power, prefix in enumerate("KMGT", 1)
                               for suffix in ("", "B", "IB")}}  # fmt: skip
"""Every message size is binary, as nccl-tests' -b/-e read them: 1M, 1MB and 1MiB are all 2**20 bytes."""


def parse_bytes(text: str, *, flag: str = "--sizes") -> int:
    """'8', '64K', '1MB', '1MiB', '16GiB' → bytes (K, M, G, T: powers of 1024, with or without B or iB)."""
    match = re.fullmatch(r"\s*([0-9]+)\s*([A-Za-z]*)\s*", text)
    unit = match.group(2).upper() if match else ""
    if not match or unit not in BYTE_UNITS or int(match.group(1)) <= 0:
        raise ConfigError(f"{flag} {text!r} is not a size; give e.g. 8, 64KiB, 1MiB or 16GiB (K, M, G: powers of 1024)")
    return int(match.group(1)) * BYTE_UNITS[unit]


def parse_size_range(text: str) -> list[int]:
    """'1KiB:16GiB' (each power of two between, as nccl-tests -f 2), 'MIN:MAX:FACTOR', or a list '1MiB,1GiB'."""
    sizes = _size_range(text)
    if not sizes or sizes[0] < ELEMENT_BYTES:
        raise ConfigError(f"--sizes {text!r} is not valid; a message holds at least one float ({ELEMENT_BYTES} B)")
    if odd := [size for size in sizes if size % ELEMENT_BYTES]:  # a row's size would not be its count of floats
        raise ConfigError(f"--sizes {text!r} is not valid: {odd[0]} B is not a whole number of {ELEMENT_BYTES}-byte "
                          f"floats; give multiples of {ELEMENT_BYTES}, e.g. 8, 64KiB or 1MiB")  # fmt: skip
    return sizes


ELEMENT_BYTES = 4  # the float32 element nccl-tests counts in


def size_in_range(part: str, text: str, *, forms: str) -> int:
    """One size of a --sizes value, refused with the whole value named (a part alone, '' of '1KiB:', says little)."""
    try:
        return parse_bytes(part)
    except ConfigError:
        raise ConfigError(f"--sizes {text!r} is not valid: {part!r} is not a size; give {forms} (K, M, G: powers "
                          "of 1024; a size above 0)") from None  # fmt: skip


SIZE_FORMS = "MIN:MAX, MIN:MAX:FACTOR or a list, e.g. 1KiB:16GiB, 1MiB:1GiB:4 or 1MiB,1GiB"


def _size_range(text: str) -> list[int]:
    if ":" not in text:
        return sorted({size_in_range(part, text, forms=SIZE_FORMS) for part in list_items(text, flag="--sizes")})
    parts = text.split(":")
    if len(parts) > 3:
        raise ConfigError(f"--sizes {text!r} is not valid; give {SIZE_FORMS}")
    low, high = (size_in_range(part, text, forms=SIZE_FORMS) for part in parts[:2])
    factor = int(parts[2]) if len(parts) == 3 and parts[2].strip().isdigit() else (2 if len(parts) == 2 else 0)
    if factor < 2 or low > high:
        raise ConfigError(f"--sizes {text!r} is not valid; MIN ≤ MAX and a whole FACTOR ≥ 2, e.g. 1KiB:16GiB:2")
    sizes = [low]
    while sizes[-1] * factor <= high:
        sizes.append(sizes[-1] * factor)
    return sizes


MAX_PREDICTED_GPUS = 2**17
"""The most GPUs a prediction takes (131,072, past the largest clusters built): each rank's shard is laid out,
so a count of millions runs for minutes to say nothing anyone can book."""


def parse_counts(text: str, *, flag: str, at_most: int | None = None) -> list[int]:
    """'1,2,4' → [1, 2, 4]: whole numbers ≥ 1 (and ≤ `at_most`), each once, in order."""
    items = list_items(text, flag=flag)
    try:
        counts = sorted({int(part) for part in items})
    except ValueError:
        counts = []
    if not counts or counts[0] < 1 or (at_most is not None and counts[-1] > at_most):
        most = f" up to {at_most:,}" if at_most is not None else ""
        raise ConfigError(f"{flag} {text!r} is not valid; give whole numbers ≥ 1{most}, e.g. 1,2,4,8")
    return counts


def gpu_counts_on_nodes(gpus: list[int], nodes: list[int], *, per_node: int, cluster: str) -> list[int]:
    """The GPU counts to predict on a cluster of `per_node`-GPU nodes: `gpus` (predict --gpus: each within one node,
    whose links the collective model prices at any count of ranks, or whole nodes) beside `nodes` (--nodes: whole
    nodes), each once, in order. A count that is neither is refused in one line with the counts that fit."""
    for count in gpus:
        if count < 2 or (count > per_node and count % per_node):
            within = f"2 to {per_node} (in one node) or " if per_node > 1 else ""
            why = (
                "one GPU all-reduces nothing" if count < 2 else f"it does not fit {cluster}'s nodes of {per_node} GPUs"
            )
            raise ConfigError(f"--gpus {count}: {why}; give {within}a "
                              f"multiple of {per_node} (whole nodes: {per_node * 2}, {per_node * 4}, …)")  # fmt: skip
    return sorted({*gpus, *(n * per_node for n in nodes)})


AMOUNT_SUFFIXES = {"": 1.0, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12}
"""A count's decimal suffixes (samples, not bytes: 6.4M is 6,400,000): K, M, B or G (a billion), T."""


def parse_amount(text: str, *, flag: str, example: str) -> float:
    """'6.4M' → 6,400,000.0: a number above 0 with an optional decimal suffix (AMOUNT_SUFFIXES, any case);
    refused in one line naming `text` and the forms, with `example`."""
    body, suffix = (text[:-1], text[-1].upper()) if text[-1:].isalpha() else (text, "")
    try:
        value = float(body) * AMOUNT_SUFFIXES[suffix]
    except (KeyError, ValueError):
        value = float("nan")
    if not (math.isfinite(value) and value > 0):
        raise ConfigError(f"{flag} {text!r} is not a count above 0; give a number, with K, M, B (a billion) or T "
                          f"if you like, e.g. {example}")  # fmt: skip
    return value
