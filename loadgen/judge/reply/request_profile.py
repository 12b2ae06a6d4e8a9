"""What a request says that a reply is judged against: worked out once per body.

A run builds each body once (`engine.requests.RequestMaker`) and records with every reply
what its request gives reason for (`params`): the scripts its texts use beyond Latin
(`scripts`), the languages they are written in or name (`languages`), the sentences
it asks to be repeated and how often (`asked_repetition`), the numbers and codes it
holds (`values`, which a template of the reply may walk through), whether it is about markup
(`about_markup`) and whether it asks for a dialogue (`asks_dialogue`). The judge reads
these, never the request itself.
"""

from __future__ import annotations

from typing import Any

from loadgen.judge.reply.asked import asked_repetition
from loadgen.judge.reply.leaks import asks_about_markup, asks_dialogue
from loadgen.judge.reply.reply_language import mixed_languages, request_languages
from loadgen.judge.reply.restatement import request_numbers
from loadgen.judge.text.language_names import names_dialect
from loadgen.judge.text.scripts import message_texts, request_scripts


def request_profile(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The `params` entries a request's messages give (only those it has)."""
    profile: dict[str, Any] = {}
    if scripts := request_scripts(messages):  # a reply in these scripts is explained
        profile["scripts"] = scripts
    languages = request_languages(messages)
    if mixed := mixed_languages(messages):  # Spanglish asked for, or written in
        languages = sorted({*languages, *mixed})
        profile["mixes_english"] = True
    if languages:  # what a reply may be written in
        profile["languages"] = languages
    if any(names_dialect(text) for text in message_texts(messages)):
        profile["dialect"] = True  # Swiss German asked for: no standard German words
    if asked := asked_repetition(messages, languages):  # repetition that is no loop
        profile["asked_repetition"] = asked
    if values := request_numbers(messages):  # what a template walks, where a loop counts
        profile["values"] = values
    # Whether a reply may write markup as a word (else any is a leak), and role lines.
    profile["about_markup"] = asks_about_markup(messages)
    profile["asks_dialogue"] = asks_dialogue(messages)
    return profile
