"""The fleet's one answer, read from the history every node writes to (`verdict`), and
the documents a scheduler's CI shows for it (`documents`)."""
