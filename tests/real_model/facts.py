"""The facts the real-model tier's two synthetic narrated videos state, spoken and shown on
screen at known times: (start, end, spoken, shown). Shared by the tier (``conftest.py``) and
``benchmarks/eval_families.py``, which make the same videos."""

from __future__ import annotations

#: The facts the synthetic harbour tour states, in speech and on screen, at known times.
HARBOUR_FACTS = (
    (2.0, 7.0, "Welcome to the harbour tour.", "HARBOUR TOUR"),
    (10.0, 15.0, "The ferry to North Point leaves from pier seven.", "PIER 7"),
    (20.0, 25.0, "The lighthouse was painted green in 1990.", "LIGHTHOUSE 1990"),
    (30.0, 35.0, "A ticket for the ferry costs twelve dollars.", "TICKET 12 DOLLARS"),
)
#: The second harbour's facts: the same kinds, other values (for ``compare``).
RIVER_FACTS = (
    (2.0, 7.0, "Welcome to the river port.", "RIVER PORT"),
    (10.0, 15.0, "The ferry to South Bay leaves from pier three.", "PIER 3"),
    (20.0, 25.0, "The lighthouse was painted red in 1975.", "LIGHTHOUSE 1975"),
    (30.0, 35.0, "A ticket for the ferry costs five dollars.", "TICKET 5 DOLLARS"),
)
