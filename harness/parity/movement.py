"""Parity's second rule: no parameter may end farther from the reference than half of how far the reference moved it.

The element-wise tolerance (`reference.TOLERANCE`: atol 1e-5 in fp32) cannot see a mistake in a parameter that moves
less than atol over the steps judged, and under plain SGD most do: in 3 steps at lr 0.01, mlp/small's largest
element moves 2.5e-7 (its first weight) to 7e-4 (its last bias), and 12 of its 18 parameters move less than 1e-5. A
strategy that never reduced its first weight across ranks passed parity with a difference of 2.4e-7. A wrong
reduction moves a parameter by a share of its own movement, however small: a sum for a mean by all of it, a rank's
own gradient for the mean (a parameter left out of the reduction) by 1.0-1.8 times it on mlp/small at 2 ranks.
Rounding moves it by far less: reordered sums change a gradient by about 1e-7 of itself, and parameters round
alike but where that tips a last bit.

The reference's movement is kept per parameter (one float each, `movements`), not its initial state. Under Adam and
its kind every element moves about lr a step, far beyond atol, so the element-wise tolerance sees a wrong reduction
there, while an element whose gradient is rounding moves lr either way (`reference.SignLike`): this rule is for
optimizers whose update is linear in the gradient.
"""

from __future__ import annotations

import torch

MOVED_SHARE = 0.5
"""How far from the reference a parameter may end, as a share of the reference's own movement of it (‖·‖₂)."""


def movements(final: dict[str, torch.Tensor], initial: dict[str, torch.Tensor]) -> dict[str, float]:
    """How far the reference moved each parameter over its steps: ‖final − initial‖₂."""
    return {name: _norm(torch.sub(t, initial[name])) for name, t in final.items()}


def strayed(
    actual: dict[str, torch.Tensor], expected: dict[str, torch.Tensor], moved: dict[str, float]
) -> tuple[str, float] | None:
    """(parameter, share) of the one that ended farthest from the reference for its movement, where that distance is
    over MOVED_SHARE of the movement and over a rounding step of every element (eps·‖ref‖₂); None where none is."""
    worst: tuple[str, float] | None = None
    for name, ref in expected.items():
        went = moved.get(name, 0.0)
        if not went:  # never moved: the element-wise tolerance judges it alone
            continue
        got = actual[name].detach()
        gap = _norm(torch.sub(got.to(ref.dtype), ref.to(got.device)))
        if gap <= MOVED_SHARE * went or gap <= torch.finfo(ref.dtype).eps * _norm(ref):
            continue
        if worst is None or gap / went > worst[1]:
            worst = (name, gap / went)
    return worst


def strayed_note(name: str, share: float) -> str:
    """The parity note of a row that failed this rule, naming what usually causes it."""
    return (
        f"{name} ended {share:.2f}× the reference's own movement of it away from the reference (over {MOVED_SHARE}× "
        "fails, however small the difference: a wrong reduction, such as its gradient summed rather than averaged "
        "over the ranks, or never reduced across them)"
    )


def _norm(tensor: torch.Tensor) -> float:
    return float(
        torch.linalg.vector_norm(tensor.float() if tensor.dtype in (torch.float16, torch.bfloat16) else tensor)
    )
