"""Values of the typed columns (maps, lists, timestamps) and their text forms.

Writers may hand these columns their text form (what the readers return, and what parts before
schema 3 stored); `to_arrow` turns it into the column's Arrow value, and the migration uses the same.
"""

from __future__ import annotations

import datetime
import json
import numbers
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pyarrow is imported where a value becomes a column's: the console's words need none of it
    import pyarrow as pa


def options_map(options: Mapping[str, Any] | str | None) -> list[tuple[str, str]] | None:
    """A strategy's options as the map's (name, JSON literal) pairs, sorted; JSON text is parsed."""
    if options is None:
        return None
    return [(key, json.dumps(value)) for key, value in sorted(options_of(options).items())]


def options_json(pairs: list[tuple[str, str]] | None) -> str | None:
    """The map's pairs as one canonical JSON text, `Configuration.options_json`'s form: pandas can
    group and compare it, which it cannot do with a dict."""
    if pairs is None:
        return None
    return json.dumps({key: json.loads(value) for key, value in pairs}, sort_keys=True)


def options_of(impl_options: Mapping[str, Any] | str | None) -> dict[str, Any]:
    """A row's `impl_options` (the readers' canonical JSON text, a dict, or null) as a dict: the one
    place that decodes them."""
    if isinstance(impl_options, Mapping):
        return dict(impl_options)
    return json.loads(impl_options) if isinstance(impl_options, str) and impl_options else {}


def options_words(impl_options: Mapping[str, Any] | str | None, *, without: tuple[str, ...] = ()) -> str:
    """'bucket_cap_mb=25 static_graph=True': the options for reading, sorted, numbers without trailing zeros."""
    options = options_of(impl_options)
    return " ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in sorted(options.items())
                    if k not in without)  # fmt: skip


def settings_words(options: list) -> str:
    """'bucket_cap_mb=1, 5, 25': several rows' options, one option's values together where each row asks only it;
    else each row's ("its defaults" for none), '; ' between them."""
    decoded = [options_of(text) for text in options]
    if len(decoded[0]) != 1 or len({tuple(d) for d in decoded}) != 1:
        return "; ".join(sorted({options_words(text) or "its defaults" for text in options}))
    (name,) = decoded[0]
    numeric = (int, float)  # numbers in their order (1, 5, 25), anything else after them as text
    values = sorted({str(d[name]): d[name] for d in decoded}.values(),
                    key=lambda v: (not isinstance(v, numeric), v if isinstance(v, numeric) else 0, str(v)))  # fmt: skip
    return f"{name}=" + ", ".join(f"{v:g}" if isinstance(v, float) else str(v) for v in values)


def strategy_label(impl: str, impl_options: str | None, *, without: tuple[str, ...] = ()) -> str:
    """The strategy with the options that distinguish it, e.g. 'stock bucket_cap_mb=25': what every line and
    page names a strategy by."""
    shown = options_words(impl_options, without=without)
    return f"{impl} {shown}" if shown else impl


def configuration_label(impl: str, impl_options: Any, *, without: tuple[str, ...] = (), grad_accum: Any = 1) -> str:
    """'stock comm_hook=fp16': what names a configuration for a user, everywhere: its strategy and the options it sets
    away from the strategy as shipped (an explicit bucket_cap_mb among them: it changes the layout), not the defaults
    a sweep spelt out (`impls.beyond_defaults`), and ' K=4' where it accumulated gradients (`accumulation_words`).
    configuration_labels keeps an option where two would read alike."""
    import impls  # the registry's defaults, read where a name is made

    label = strategy_label(impl, impls.beyond_defaults(impl, options_of(impl_options)), without=without)
    return label + accumulation_words(grad_accum)


def accumulation_words(grad_accum: Any) -> str:
    """' K=4' for a configuration that ran 4 micro-batches a step (`bench --grad-accum 4`); '' at K=1 or unknown (a row
    from before the column), whose names read as they always did: K=1 and K=4 of one strategy never read alike."""
    try:
        count = int(grad_accum)
    except (TypeError, ValueError):  # None, or a missing value read as NaN
        return ""
    return f" K={count}" if count > 1 else ""


def row_label(row: Any) -> str:
    """A row's configuration_label (a mapping or pandas row of configs columns): its strategy, options and K."""
    get = row.get if hasattr(row, "get") else lambda key, default=None: getattr(row, key, default)
    return configuration_label(row["impl"], get("impl_options"), grad_accum=get("grad_accum", 1))


def configuration_labels(impl_names, impl_options, *, without: tuple[str, ...] = ()) -> list[str]:
    """Each configuration's configuration_label, as one table names them: where configurations that asked
    different options would read alike (one spelt out a default the other left), each keeps the options that
    differ among them, so no two read alike."""
    pairs = list(zip(impl_names, impl_options, strict=True))
    short = [configuration_label(i, o, without=without) for i, o in pairs]
    alike: dict[str, dict[str, dict]] = {}
    for label, (_, options) in zip(short, pairs, strict=True):
        asked = options_of(options)
        alike.setdefault(label, {})[json.dumps(asked, sort_keys=True, default=str)] = asked
    names = []
    for label, (impl, options) in zip(short, pairs, strict=True):
        group, asked = list(alike[label].values()), options_of(options)
        differing = {k for d in group for k in d if any(k not in e or e[k] != d[k] for e in group)}
        if len(group) < 2 or not differing & set(asked):
            names.append(label)
            continue
        import impls

        shown = {**impls.beyond_defaults(impl, asked), **{k: asked[k] for k in differing & set(asked)}}
        names.append(strategy_label(impl, shown, without=without))
    return names


def strategy_labels(rows, *, without: tuple[str, ...] = ()) -> list[str]:
    """Each row's name in a table of them (configuration_labels; its repeat not named), with its K where not 1."""
    names = configuration_labels(rows["impl"], rows["impl_options"], without=without)
    accum = rows["grad_accum"] if "grad_accum" in rows else [1] * len(names)
    return [name + accumulation_words(k) for name, k in zip(names, accum, strict=True)]


def batch_words(row: Mapping[str, Any]) -> str:
    """A configuration's samples per rank per step: '32', or 'K=4 × 32 = 128 (global batch 256)' where it
    accumulated gradients, the global batch being every rank's (world size × K × batch size): the run page's cell."""
    size, accum = row.get("batch_size"), row.get("grad_accum")
    if not accumulation_words(accum):
        return "" if size is None or size != size else str(int(size))  # None or NaN: a failed row's unknown
    per_rank = int(accum) * int(size)
    return f"K={int(accum)} × {int(size)} = {per_rank} (global batch {per_rank * int(row['world_size'])})"


def to_arrow(value: Any, type_: pa.DataType) -> Any:
    """`value` as pyarrow takes it for a column of `type_`: text forms of maps, lists and
    timestamps are parsed (a timestamp without an offset is UTC); anything else is unchanged."""
    if value is None:
        return None
    import pyarrow as pa  # the caller's, imported already

    if pa.types.is_map(type_):
        return options_map(value)
    if pa.types.is_list(type_) and isinstance(value, str):
        return json.loads(value)
    if pa.types.is_timestamp(type_) and isinstance(value, str):
        parsed = datetime.datetime.fromisoformat(value)
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=datetime.timezone.utc)
    return value


def is_text_typed(type_: pa.DataType) -> bool:
    """Columns that older parts (and writers) may hold as text: maps, lists, timestamps."""
    import pyarrow as pa  # the caller's, imported already

    return pa.types.is_map(type_) or pa.types.is_list(type_) or pa.types.is_timestamp(type_)


def message_words(comm_bytes: Any) -> str:
    """'8.09 MiB of messages': the sizes of a step's collectives (`comm_bytes`, from the bucket timeline), beside
    their ms, where a compression hook's saving shows and gloo's ms barely move; '' where not measured. Messages,
    not what a rank puts on the wire: a ring all-reduce of S bytes sends 2(n-1)/n × S of it."""
    if not isinstance(comm_bytes, numbers.Real) or comm_bytes != comm_bytes:
        return ""
    mib = comm_bytes / 2**20
    return f"{mib:.3g} MiB of messages" if mib >= 0.1 else f"{comm_bytes / 1024:.3g} KiB of messages"


NOT_JUDGED = "not judged: "
"""How the parity note of a row that differs from the reference by design begins (a lossy hook, the baseline): its
strategy's reason and the difference measured follow."""


def parity_words(row: Mapping[str, Any], *, why: bool = True) -> str:
    """'parity ok', 'PARITY FAILED', 'parity not judged'; with `why`, one that differs by design says why and by
    how much: 'parity not judged: comm_hook=bf16 compresses gradients (lossy by design), max |Δ| 7.6e-06 (tolerance
    1e-05)' (a fp16 hook read word for word as `local`, as if nothing had been checked)."""
    ok = row.get("parity_ok")
    if str(ok) in ("True", "False"):  # numpy's bool too; null (None, NaN, NA) is not judged
        return "parity ok" if str(ok) == "True" else "PARITY FAILED"
    note, diff, allowed = (row.get(k) for k in ("parity_note", "parity_max_abs_diff", "parity_tolerance"))
    known = isinstance(diff, numbers.Real) and diff == diff  # NaN: no difference recorded
    if not why or not known or not isinstance(note, str) or not note.startswith(NOT_JUDGED):
        return "parity not judged"
    versus = f" (tolerance {allowed:.2g})" if isinstance(allowed, numbers.Real) and allowed == allowed else ""
    return f"parity not judged: {note[len(NOT_JUDGED) :].split('; ')[0]}, max |Δ| {diff:.2g}{versus}"


LARGEST_IN = "largest difference in "
"""How the parity note of a judged row begins where some parameter differs (reference.ParityResult.where)."""


def failed_parity_words(row: Mapping[str, Any]) -> str:
    """Why a row failed parity, with the size a reader can judge: 'max |Δ| 1.30e-05 against 1.03e-05 in
    encoder.block.2.layer.1.DenseReluDense.wo.weight' (its largest difference, the tolerance at that element, and
    the parameter); a note of another kind (a loss that sums) as it is."""
    note, diff, allowed = (row.get(k) for k in ("parity_note", "parity_max_abs_diff", "parity_tolerance"))
    if not isinstance(note, str) or not note.startswith(LARGEST_IN) or not _known(diff):
        return note if isinstance(note, str) else ""
    versus = f" against {allowed:.2e}" if _known(allowed) else ""
    return f"max |Δ| {diff:.2e}{versus} in {note[len(LARGEST_IN) :]}"


def _known(figure: Any) -> bool:
    return isinstance(figure, numbers.Real) and figure == figure  # NaN: not recorded


JUDGED_ON = "judged on this configuration's repeat "
"""How the parity note of a repeat that did not judge begins (grid.Configuration.judges_parity): the repeat (from 1)
whose row has the verdict follows; runs from before it say "judged on this configuration's first repeat"."""


def judged_on(repeat: int) -> str:
    """The parity note of a row whose verdict is on repeat `repeat` (from 0) of its configuration: counted from 1,
    as the console counts repeats, with the id's own form beside it."""
    return f"{JUDGED_ON}{repeat + 1} (its config_id ends -r{repeat})"


def judging_repeat_in(note: Any) -> int | None:
    """The repeat (from 1) a row's parity note says holds its verdict; None where it says none."""
    if not isinstance(note, str):
        return None
    if note == "judged on this configuration's first repeat":  # the note before any other repeat could judge
        return 1
    number = note[len(JUDGED_ON) :].split(" ")[0] if note.startswith(JUDGED_ON) else ""
    return int(number) if number.isdigit() else None


HOOK_TIMED = "measured through a communication hook (--bucket-timeline), which its step pays"
"""How `comm_note` begins where timing a strategy's collectives cost its step (DDP's buckets timed by a hook)."""
CASTS_COUNTED = "casts counted in flight"
"""The words of the `comm_note` of DDP under an fp16/bf16 compression hook (impls/stock.py's CASTS_IN_FLIGHT; the
face reads the results, not the plug-in): its time in flight holds the hook's casts, compute."""


def casts_counted_part(comm_note: Any) -> str:
    """The part of a `comm_note` that says a compression hook's casts are inside its time in flight ('the bf16 hook's
    casts counted in flight: a bucket's time runs from ...'), or "": what the console's line and the run page say."""
    parts = comm_note.split("; ") if isinstance(comm_note, str) else []
    return next((part for part in parts if CASTS_COUNTED in part), "")


UNHOOKED = "--bucket-timeline measures it"
"""How `comm_note` ends where that timing was not asked for, and the step ran without it."""


def timed_by_hook(comm_note: Any) -> bool | None:
    """Whether a configuration's steps paid for timing its collectives (`--bucket-timeline` on DDP's buckets), as
    its `comm_note` records it; None where the note cannot say (timing cost nothing, or a run from before)."""
    if not isinstance(comm_note, str):
        return None
    if comm_note.startswith(HOOK_TIMED):
        return True
    return False if comm_note.endswith(UNHOOKED) else None


UNBOUNDED_RATIO = 1000.0  # an interval's end past it says only that the repeats are too few to bound it


def ratio_number(ratio: float) -> str:
    """A ratio (an interval's end) for reading: '<0.01' rather than a misleading '0.00', whole numbers from 100 up,
    '>1000' past UNBOUNDED_RATIO (two repeats' 99.5 % interval once read '0.00–83191606.53')."""
    if ratio < 0.01:
        return "<0.01"
    if ratio > UNBOUNDED_RATIO:
        return f">{UNBOUNDED_RATIO:.0f}"
    return f"{ratio:.0f}" if ratio >= 100 else f"{ratio:.2f}"


def ms_text(value: float) -> str:
    """A time in ms for reading: three significant digits, never an exponent ('1720', not '1.72e+03')."""
    return f"{value:.0f}" if abs(value) >= 999.5 else f"{value:.3g}"


def samples_text(per_s: float) -> str:
    """Whole samples a second from 10 up; below, three significant digits (0.49, not '0'; 3.64 and 4.05, not both
    '4'): the console's and the run page's configurations table's one formatter."""
    return f"{per_s:.0f}" if per_s >= 10 else f"{per_s:.3g}"


def counted(count: int, noun: str) -> str:
    """'1 thread', '4 threads', '0 grid steps': a count with its noun, singular for one (pages and lines once said
    'thread(s)'; stats.repeats_text and the figures' world labels count repeats and ranks so)."""
    return f"{count} {noun}{'s' * (count != 1)}"


def rate_text(value: float) -> str:
    """'1.69M', '845K', '17.4': a rate in three significant digits, as a table's other figures ('1,690,080' read as
    seven); the suffix chosen after rounding (999,950 is '1M', not '1e+03K'), none past a billion's ('1,000B')."""
    rounded = float(f"{value:.3g}")
    for suffix, size in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if rounded >= size:
            return f"{rounded / size:,.4g}{suffix}"
    return f"{rounded:.3g}"
