"""Which face a read gives the bug: the toy model's fate as a function of one row's read.

A row that read some of another request's KV (its *foreign share*: the share of what
the row read that another request wrote) changes what the model writes, more the more
it read:

- above `salad_foreign_share`: **salad**. For a stretch of tokens the model writes
  sub-word soup spelled from the entries it read, then goes back to its script and
  finishes cleanly;
- above `cross_talk_foreign_share`: **cross-talk**. The facts it has yet to write (the
  account in a tool call's arguments, the codes an answer states) become the foreign
  request's; the reply finishes cleanly, about the wrong request;
- above `fatal_foreign_share`: **lost**. It loops in its channel until `max_tokens`
  (#52448's face).

The bands are checked from the top: a threshold at or above a more severe one never
fires (`1` turns a face off). A reply's face only escalates: each face acts once, the
first time a read reaches it, and a later read acts only if it reaches a more severe
one. Nothing else decides: no layout, no random draw.
"""

from __future__ import annotations

from enum import IntEnum


class Face(IntEnum):
    """What a foreign read did to a reply, least severe first."""

    NONE = 0
    SALAD = 1
    CROSS_TALK = 2
    LOST = 3


def face_for(foreign_share: float, *, salad: float, cross_talk: float, fatal: float) -> Face:
    """The face a read with this foreign share gives (each threshold: share above it)."""
    if foreign_share > fatal:
        return Face.LOST
    if foreign_share > cross_talk:
        return Face.CROSS_TALK
    if foreign_share > salad:
        return Face.SALAD
    return Face.NONE
