"""Generated families at two sizes: every `SAMPLE`th member in the README's test command,
every member in the long tier (which CI runs).

A family of thousands of generated cases is the specification of a rule; its sample
(the same members each run, spread over the whole family: `members[::SAMPLE]`) keeps
the fast tier honest about every kind of member while costing a fraction of it.
A test takes `step` and reads its family through `sample(members, step)`; figures it
asserts on (at least N caught) scale by `step` as well."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

import pytest

#: The fast tier's share of a family: one member in SAMPLE.
SAMPLE = 4

#: `@pytest.mark.parametrize("step", SIZES)`: the sample in the fast tier, the whole
#: family in the long tier.
SIZES = [pytest.param(SAMPLE, id="sample"),
         pytest.param(1, id="whole", marks=pytest.mark.long)]

T = TypeVar("T")


def sample(members: Sequence[T], step: int) -> list[T]:
    """Every `step`th member, the first included: the same members every run."""
    return list(members[::step])
