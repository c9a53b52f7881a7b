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

A parameter whose gradient is itself rounding is left to the element-wise tolerance (`beyond_rounding`): where the
true gradient is 0, as for BERT's attention key bias (softmax is blind to a shift the bias adds to every key's
score), the computed one is rounding noise, which another order of summing changes whole from the second step on.
Stock DDP at 4 ranks on bert/tiny (fp32, SGD) failed the rule so: key.bias ended 0.75× its movement away, by
7.5e-9. Such a parameter is told apart by a second reference whose averaged gradients are each one rounding step
larger (`reference_run(nudged=True)`): bert/tiny's key biases end 0.57-1.2× their movement away in fp32, every
other parameter of bert/tiny and mlp/small at most 8e-5× (fp32) or 3.5e-3× (bf16), at 3 and 4 ranks. Under bf16
the key biases' 0.018× keeps them judged: summed in another order they ended where the reference did. At 2 ranks
every order of summing is one (a + b = b + a, and halving is exact), so only 3 ranks or more show any of this. The
second reference trains once per setup, as the first does, and only where this rule judges.
"""

from __future__ import annotations

import torch

MOVED_SHARE = 0.5
"""How far from the reference a parameter may end, as a share of the reference's own movement of it (‖·‖₂)."""


ROUNDING_SHARE = 0.05
"""A parameter whose end a rounding step of every averaged gradient moves by over this share of its movement moves
by rounding (its gradient is), not by the reduction: the movement rule does not judge it."""


def movements(final: dict[str, torch.Tensor], initial: dict[str, torch.Tensor]) -> dict[str, float]:
    """How far the reference moved each parameter over its steps: ‖final − initial‖₂."""
    return {name: _norm(torch.sub(t, initial[name])) for name, t in final.items()}


def beyond_rounding(moved: dict[str, float], reach: dict[str, float]) -> dict[str, float]:
    """The movements the rule judges: `moved`, with 0 (not judged) for each parameter whose end `reach` (how far the
    nudged reference ended from the reference, `movements(nudged, final)`) says rounding moves by over ROUNDING_SHARE
    of it."""
    return {name: went if reach.get(name, 0.0) <= ROUNDING_SHARE * went else 0.0 for name, went in moved.items()}


def strayed(
    actual: dict[str, torch.Tensor], expected: dict[str, torch.Tensor], moved: dict[str, float]
) -> tuple[str, float] | None:
    """(parameter, share) of the one that ended farthest from the reference for its movement, where that distance is
    over MOVED_SHARE of the movement and over a rounding step of every element (eps·‖ref‖₂); None where none is."""
    worst: tuple[str, float] | None = None
    for name, ref in expected.items():
        went = moved.get(name, 0.0)
        if not went:  # never moved, or by rounding (`beyond_rounding`): the element-wise tolerance judges it alone
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
