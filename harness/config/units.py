"""The units a person types: bandwidths, latencies and bucket caps, parsed into numbers (bytes/s, seconds, MiB)."""

from __future__ import annotations

import re

from harness.protocols import ConfigError


def parse_bandwidth(text: str) -> float:
    """'90GB/s', '400Gb/s', '1.5 GB/s' → bytes per second (GB = 1e9, as nccl-tests reports busbw)."""
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([GMK])([Bb])(?:/s|ps)?\s*", text)
    if not match or float(match.group(1)) <= 0:
        raise ConfigError(f"--busbw {text!r} is not a bandwidth; give e.g. 90GB/s, 400Gb/s or 800MB/s")
    value = float(match.group(1)) * {"G": 1e9, "M": 1e6, "K": 1e3}[match.group(2)]
    return value / 8 if match.group(3) == "b" else value


def parse_latency(text: str) -> float:
    """'30us', '0.5ms', '2e-5s' → seconds."""
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:e-?[0-9]+)?)\s*(us|µs|ms|ns|s)\s*", text)
    if not match:
        raise ConfigError(f"--latency {text!r} is not a time; give e.g. 30us, 0.2ms or 5e-6s")
    return float(match.group(1)) * {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0}[match.group(2)]


def parse_caps(text: str) -> list[float]:
    try:
        caps = sorted({float(c) for c in text.split(",") if c.strip()})
    except ValueError:
        caps = []
    if not caps or caps[0] <= 0:
        raise ConfigError(f"--caps {text!r} is not valid; give bucket caps in MiB > 0, e.g. 1,5,10,25,50,100")
    return caps
