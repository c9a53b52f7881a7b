"""What fits a GPU: a rank's need (memory.need_mb) against a GPU's memory in words ('fits', 'fits, tight', 'does
not fit, narrowly', within the count's measured error), the largest batch a rank at which each strategy would fit,
and with room (said no further than twice the batch counted). Pure: state rows (memory.state_per_rank) in."""

from __future__ import annotations

import numpy as np
import pandas as pd

from harness.perfmodel.memory import mib_text, need_mb, need_parts


def fit_phrase(rows: pd.DataFrame, capacity_gib: float, *, terse: bool = False) -> str:
    """'fits (72.8 of 79.11 GiB a rank at most: 6.31 GiB left for …)', 'fits, tight (…)' (room_words), 'does not fit
    (…; at batch 6 a rank or fewer it would, at w8)' (fit_words); `terse`: '6.31 GiB at w16', what is left, the
    console's rows, whose header says so."""
    need, worlds = need_mb(rows).to_numpy(), rows["world_size"].to_numpy().astype(int)
    fits, batches = need <= capacity_gib * 1024, largest_batch(rows, capacity_gib).to_numpy()
    grads = rows.get("held_grad_mb", np.inf)  # the count overreads where activations lead
    heavy = bool((rows.get("activation_mb", pd.Series([0.0])) >= 2 * grads).all())
    phrase, most = _fit_phrase(fits, need, worlds, capacity_gib, terse, heavy), int(np.argmax(batches))
    if not fits.any() and 0 < batches[most] < rows.get("batch_size", pd.Series([0])).max():  # at a smaller one
        at = f", at w{worlds[most]}" if len(set(batches)) > 1 else ""  # the same at every count: no count to name
        phrase = phrase.removesuffix(")") + f"; at batch {batches[most]} a rank or fewer it would{at}"
        phrase += f"{_tight_batch(rows.iloc[[most]], batches[most], capacity_gib)})"
    return phrase


def _tight_batch(row: pd.DataFrame, batch: int, capacity_gib: float) -> str:
    """', tight: at 3 with room' where the largest batch that fits leaves under COUNT_BELOW_PEAK of the count, as the
    batch with room (roomy_batch, the console's header and the answer's) is said elsewhere (', tight: no batch has
    room' where even batch 1 leaves too little); '' where it has room."""
    roomy = int(largest_batch(row, capacity_gib / (1 + COUNT_BELOW_PEAK)).iloc[0])
    return "" if roomy >= batch else f", tight: at {roomy} with room" if roomy else ", tight: no batch has room"


def _fit_phrase(
    fits: np.ndarray, need: np.ndarray, worlds: np.ndarray, capacity_gib: float, terse: bool, heavy: bool
) -> str:
    if fits.all():  # and where the most is: a page over 8-1,024 GPUs and a console over those asked may differ so
        most = f", at w{worlds[int(np.argmax(need))]}" if len(set(need.round(6))) > 1 else ""
        return room_words(need.max(), capacity_gib, f" a rank at most{most}", terse=terse, at=most.lstrip(","))
    if not fits.any():  # 'at the least' where the need differs by the GPU count; a miss the count may make, said
        over, least = need.min() / (capacity_gib * 1024) - 1, " at the least" * (len(set(need.round(6))) > 1)
        narrowly = (f", {over:.1%} over {capacity_gib:g} GiB: within the count's error, a GPU run decides"
                    if heavy and over <= COUNT_ABOVE_PEAK else "")  # fmt: skip
        return f"does not fit{', narrowly' * bool(narrowly)} ({mib_text(need.min())} a rank{least}{narrowly})"
    first = int(np.argmax(fits))
    if fits[first:].all():  # fits from some GPU count on, as a split state does
        there = room_words(need[first], capacity_gib, " a rank there", terse=terse)
        return f"from w{worlds[first]}: {there}" if terse else there.replace("fits", f"fits from w{worlds[first]}", 1)
    worst = int(np.argmax(np.where(fits, -np.inf, need)))
    return (f"fits at {', '.join(f'w{w}' for w in worlds[fits])}, not at {', '.join(f'w{w}' for w in worlds[~fits])} "
            f"({mib_text(need[worst])} a rank at w{worlds[worst]})")  # fmt: skip


COUNT_BELOW_PEAK = 0.08
"""The most the count (need_mb) has read below a rank's measured peak: 8 %, gpt2 with gradient_as_bucket_view,
backward's own temporaries (docs/measured/memory-model-cpu.md). Where a GPU leaves less than this share of the count
beside it, the fit rests on the count being no lower than it has been: said 'tight'."""


COUNT_ABOVE_PEAK = 0.07
"""How far the count (need_mb) has read above a DDP rank's measured peak where activations dominate (at least twice
the gradients): 7 %, stock on gpt2/small (backward frees activations as it makes gradients; elsewhere the count was
the peak; docs/measured/memory-model-cpu.md). A miss by no more there is within the count's error: said 'narrowly'."""


def room_words(need: float, capacity_gib: float, where: str = " a rank", *, terse: bool = False, at: str = "") -> str:
    """'fits (77.4 of 79.11 GiB a rank at most: 1.71 GiB left for buffers, the CUDA context and NCCL's)', 'fits,
    tight (…)' where what is left is under COUNT_BELOW_PEAK of the count, 'does not fit (…)' where none is: a need
    (MiB, need_mb's) against a GPU of `capacity_gib`; `where`: what the figure is ('a rank at most, at w16');
    `terse`: '1.71 GiB at w16' (`at`; 'tight, …'), the console's rows, beside the need, under a header that says it
    fits the GPU's memory and this is what is left (and a line what that is for)."""
    left = capacity_gib * 1024 - need
    if left < 0:
        return f"does not fit ({mib_text(need)}{where})"
    tight = ", tight" if is_tight(need, capacity_gib) else ""
    if terse:
        return f"{tight.lstrip(', ')}{', ' * bool(tight)}{mib_text(left)}{at}"
    held = mib_text(need).removesuffix(" GiB")  # '77.4 of 79.11 GiB', '450 MiB of 79.11 GiB'
    left_for = f"{mib_text(left)} left for buffers, the CUDA context and NCCL's"
    return f"fits{tight} ({held} of {capacity_gib:g} GiB{where}: {left_for})"


def is_tight(need: float, capacity_gib: float) -> bool:
    """Whether a need (MiB, need_mb's) fits a GPU of `capacity_gib` with less than COUNT_BELOW_PEAK of it left."""
    return 0 <= capacity_gib * 1024 - need < COUNT_BELOW_PEAK * need


ROOMY_BATCH_CHECKED = 2
"""How far past the batch its activations were counted at a roomy batch is said: twice it. The count grows by what
one more sample adds, a growth checked over twice the batch (mlp's full size: 8.5 MiB at 32 samples a rank, 17.0 at
64; docs/measured/memory-model-cpu.md) and over no more; past it a GPU's working memory may grow otherwise."""


def roomy_batch(state: pd.DataFrame, capacity_gib: float) -> pd.Series:
    """Per state row, the most samples a rank at which its need fits `capacity_gib` with room (not `is_tight`: the
    need at most capacity / (1 + COUNT_BELOW_PEAK)), as largest_batch counts it, but at most ROOMY_BATCH_CHECKED × the
    row's batch: there it fits with room, past it unchecked (a tiny model's read 537826 samples a rank)."""
    batch = largest_batch(state, capacity_gib / (1 + COUNT_BELOW_PEAK))
    return batch.clip(upper=state["batch_size"] * ROOMY_BATCH_CHECKED).astype(int) if "batch_size" in state else batch


def largest_batch(state: pd.DataFrame, capacity_gib: float) -> pd.Series:
    """Per state row, the most samples a rank at which its need (need_mb) fits `capacity_gib`: its activations
    grown from the row's batch by what one more sample adds (`activation_sample_added_mb`; where not counted, the
    total over the batch, which a part kept once at any batch makes too large: the batch said is then at most the
    true one), its state, buckets, unsharded parts and optimizer temporaries as
    they are (none grows with the batch); 0 where even none would fit."""
    if "batch_size" not in state:  # rows that do not say their batch: none to scale from
        return pd.Series(0, index=state.index)
    held, kept, copies, optimizer = need_parts(state)
    room = capacity_gib * 1024 - held  # what a step may hold beside its state: need_mb's inequality, solved for it
    per_sample = (state["activation_mb"] / state["batch_size"]).where(lambda mb: mb > 0)  # none kept: no bound here
    if "activation_sample_added_mb" in state:  # counted at two batches: what one more sample adds (a fixed part apart)
        per_sample = state["activation_sample_added_mb"].where(lambda mb: mb > 0).fillna(per_sample)
    fixed = state["activation_mb"] - per_sample * state["batch_size"]  # 0 where only the total is known
    batch = np.floor((room - kept - fixed) / per_sample).where((optimizer <= room) & (kept + copies <= room))
    return batch.fillna(0).clip(lower=0).astype(int)
