"""What each rollback policy does with a clock behind its last unit, within its bound or past it.

One table for the generator's tests (tests/test_policies.py) and the claim's
(tests/test_worker_lease.py), so that the two cannot disagree on what a policy does.
"""

from __future__ import annotations

# policy: (outcome within MAX_ROLLBACK_MS, outcome past it). raise ignores the bound, and so
# does clock_sequence while clock-sequence values remain (docs/rollback.rst).
OUTCOMES = {
    "raise": ("raises", "raises"),
    "wait": ("waits", "raises"),
    "borrow": ("borrows", "raises"),
    "ring": ("waits", "raises"),
    "clock_sequence": ("new clock sequence", "new clock sequence"),
}


def rollback_outcomes(within: int, beyond: int) -> list[tuple[str, int, str]]:
    """``(policy, amount, outcome)`` for every policy, within its bound and past it.

    ``within`` and ``beyond`` are the test's own amounts (how far behind, or the bound) for a
    rollback inside the policy's MAX_ROLLBACK_MS and past it; the outcomes are OUTCOMES'.
    """
    return [
        (policy, amount, outcome)
        for policy, outcomes in OUTCOMES.items()
        for amount, outcome in zip((within, beyond), outcomes, strict=True)
    ]
