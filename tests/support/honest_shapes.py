"""Families of honest replies that repeat themselves, generated with varied values.

An honest model repeats itself in many ways a careless loop or leak rule mistakes for
a broken server: a reasoning that walks table rows or invoices with one sentence
template; grids of zeros, identity matrices, arrays of identical objects; a round or a
song's refrain written out; prose and code about think tags, special tokens, chat
templates and DSML tool markup; tool calls whose argument is a long array of one
value. Each family builds its members from a seed (row counts, values, sizes, songs,
grid sizes differ), so the rules are held to the shape, not to one text. None of them
may get a gated verdict.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any

from tests.support.legit_corpus import LegitReply

MEMBERS = 20  # per family

_COMPANIES = [
    "Acme Corp", "Meridian Labs", "Northwind Traders", "Globex", "Initech", "Umbrella Health",
    "Stark Logistics", "Wayne Foods", "Hooli", "Vandelay Imports", "Soylent", "Cyberdyne",
    "Blue Harbor", "Pine & Finch", "Lakeside Dental", "Orbit Freight", "Sunrise Bakery",
    "Kestrel Air", "Tallow Candle Co", "Granite Works", "Velvet Road", "Copperline",
    "Juniper Legal", "Helios Solar", "Marlin Boats", "Quarry Hill Farm", "Redwood Clinic",
    "Silverleaf Hotel", "Atlas Printing", "Brightwater Spa", "Nimbus Cloud", "Fennel Bistro",
]
_PEOPLE = ["Ana Ruiz", "Ben Okafor", "Chen Wei", "Dana Kim", "Eli Cohen", "Farah Nasser",
           "Gus Lindqvist", "Hana Sato", "Ivan Petrov", "Jade Moreau", "Kofi Mensah",
           "Lena Vogel", "Mia Rossi", "Noah Berg", "Omar Haddad", "Priya Rao"]
_REGIONS = ["Lisbon", "Osaka", "Denver", "Nairobi", "Oslo", "Lima", "Perth", "Seoul",
            "Dublin", "Quito", "Cairo", "Austin", "Hanoi", "Turin", "Accra", "Bergen"]
_PLANS = ["free", "pro", "business", "enterprise"]
_STATUSES = ["paid", "open", "overdue", "disputed", "refunded"]


def _account(rng: random.Random) -> str:
    letters = "ABCDEFGHJKLMNPQRSTUVWXYZ"
    return "".join(rng.choice(letters + "23456789") for _ in range(5)) + rng.choice(letters)


def _amount(rng: random.Random) -> str:
    return f"{rng.uniform(12, 25_000):,.2f}"


def _date(rng: random.Random) -> str:
    return f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"id": f"call-{name}", "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)}}


def _answer_or_call(rng: random.Random, reasoning: str, summary: str, name: str
                    ) -> LegitReply:
    """A reasoning ends in an answer in prose, or in the tool call it was working to."""
    if rng.random() < 0.5:
        return LegitReply(name, reasoning=reasoning, content=summary)
    return LegitReply(name, reasoning=reasoning, finish_reason="tool_calls",
                      expects_tool_call=True,
                      tool_calls=[_call("change_plan", account_id=_account(rng),
                                        plan=rng.choice(_PLANS))])


# ------------------------------------------------------------ reasoning walks a table


_ROW_TEMPLATES: list[Callable[[random.Random, int], str]] = [
    lambda r, i: (f"Row {i}: {r.choice(_COMPANIES)} has {r.randint(1, 400)} seats on the "
                  f"{r.choice(_PLANS)} plan, {_amount(r)} USD a month, renewing on "
                  f"{_date(r)}; status {r.choice(_STATUSES)}."),
    lambda r, i: (f"Next, {r.choice(_COMPANIES)} ({_account(r)}): plan {r.choice(_PLANS)}, "
                  f"{r.randint(1, 400)} seats, last invoice {_amount(r)} USD on {_date(r)}, "
                  f"{r.choice(_STATUSES)}."),
    lambda r, i: (f"Checking {_account(r)}: owner {r.choice(_PEOPLE)}, region "
                  f"{r.choice(_REGIONS)}, balance {_amount(r)} USD, due {_date(r)}."),
    lambda r, i: f"Line {i} is {r.choice(_COMPANIES)}, {_amount(r)} USD, {r.choice(_STATUSES)}.",
    lambda r, i: (f"Region {r.choice(_REGIONS)} served {r.randint(1_000, 90_000)} requests "
                  f"with {r.randint(0, 400)} errors and a p99 of {r.randint(80, 2_000)} ms."),
    lambda r, i: (f"{i}. {r.choice(_PEOPLE)} on {r.choice(_COMPANIES)}'s account: "
                  f"{r.randint(1, 60)} logins last month, {r.randint(0, 9)} open tickets, "
                  f"plan {r.choice(_PLANS)}."),
]


def reasoning_row_walks(members: int = MEMBERS) -> list[LegitReply]:
    """A reasoning that walks a table's rows with one sentence template, then answers."""
    out = []
    for seed in range(members):
        rng = random.Random(1000 + seed)
        template = _ROW_TEMPLATES[seed % len(_ROW_TEMPLATES)]
        rows = rng.randint(6, 45)
        walk = " ".join(template(rng, i) for i in range(1, rows + 1))
        reasoning = ("The user wants the accounts that need attention. The table has "
                     f"{rows} rows; let me go through them one by one. {walk} That is every "
                     "row. The overdue and disputed ones are what they asked about.")
        out.append(_answer_or_call(
            rng, reasoning, f"I went through all {rows} rows; the overdue accounts are "
            "listed above with their balances.", f"reasoning walks {rows} table rows "
            f"(template {seed % len(_ROW_TEMPLATES)}, seed {seed})"))
    return out


_INVOICE_TEMPLATES: list[Callable[[random.Random, int, int], str]] = [
    lambda r, i, n: (f"Invoice INV-{n + i} for {r.choice(_COMPANIES)}: {_amount(r)} "
                     f"{r.choice(['USD', 'EUR', 'GBP'])}, issued {_date(r)}, due {_date(r)}, "
                     f"{r.choice(_STATUSES)}."),
    lambda r, i, n: (f"{_date(r)}: invoice {n + i} from {r.choice(_COMPANIES)} for "
                     f"{_amount(r)} USD ({r.choice(_STATUSES)})."),
    lambda r, i, n: (f"Invoice #{i} ({r.choice(_COMPANIES)}) totals {_amount(r)} USD and is "
                     f"{r.choice(_STATUSES)}."),
    lambda r, i, n: (f"INV-{n + i} dated 2026-02-{i % 28 + 1:02d} for {_amount(r)} USD is "
                     f"{r.choice(_STATUSES)}; it matches ledger entry "
                     f"{r.randint(10_000, 99_999)}."),
    lambda r, i, n: (f"The invoice for {r.choice(_COMPANIES)} ({_account(r)}) is "
                     f"{_amount(r)} USD, due {_date(r)}."),
]


def reasoning_invoice_walks(members: int = MEMBERS) -> list[LegitReply]:
    """A reasoning that checks invoices one by one with one sentence template."""
    out = []
    for seed in range(members):
        rng = random.Random(2000 + seed)
        template = _INVOICE_TEMPLATES[seed % len(_INVOICE_TEMPLATES)]
        count = rng.randint(6, 40)
        first = rng.randint(1000, 90_000)
        walk = " ".join(template(rng, i, first) for i in range(1, count + 1))
        reasoning = (f"I need to reconcile {count} invoices against the ledger before I "
                     f"answer. {walk} Those are all of them; the totals reconcile except "
                     "the disputed ones.")
        out.append(_answer_or_call(
            rng, reasoning, f"All {count} invoices reconcile with the ledger except the "
            "disputed ones, which I listed.", f"reasoning walks {count} invoices "
            f"(template {seed % len(_INVOICE_TEMPLATES)}, seed {seed})"))
    return out


# --------------------------------------------------------------- grids and matrices


def _matrix_text(cells: list[list[int]], style: str) -> str:
    if style == "plain":
        return "\n".join(" ".join(str(c) for c in row) for row in cells)
    if style == "python":
        return "[" + ",\n ".join("[" + ", ".join(str(c) for c in row) + "]"
                                 for row in cells) + "]"
    if style == "numpy":
        return "array([" + ",\n       ".join("[" + ", ".join(f"{c}." for c in row) + "]"
                                            for row in cells) + "])"
    if style == "latex":
        return ("\\begin{pmatrix}\n" + " \\\\\n".join(" & ".join(str(c) for c in row)
                                                     for row in cells) + "\n\\end{pmatrix}")
    if style == "markdown":
        head = "| " + " | ".join(f"c{j}" for j in range(len(cells[0]))) + " |"
        rule = "|" + "---|" * len(cells[0])
        return "\n".join([head, rule] + ["| " + " | ".join(str(c) for c in row) + " |"
                                         for row in cells])
    raise ValueError(style)


_STYLES = ["plain", "python", "numpy", "latex", "markdown"]


def _matrix_reply(rng: random.Random, name: str, what: str, cells: list[list[int]],
                  style: str) -> LegitReply:
    text = _matrix_text(cells, style)
    fenced = style in ("plain", "python", "numpy") and rng.random() < 0.6
    body = f"```\n{text}\n```" if fenced else text
    intro = rng.choice(["Here is the {w}:", "The {w}, written out:", "Sure, the {w} is:",
                        "As requested, the {w}:", "This is the {w} you asked for:"])
    content = f"{intro.format(w=what)}\n\n{body}\n"
    if rng.random() < 0.5:
        content += "\nEvery entry off the pattern is 0, as asked."
    reasoning = f"The user wants the {what}. I will write it out in full."
    if rng.random() < 0.3:  # a model that drafts the answer in its reasoning first
        reasoning += f" Let me draft it:\n{text}\nThat is right."
    return LegitReply(name, content=content, reasoning=reasoning)


def zero_grids(members: int = MEMBERS) -> list[LegitReply]:
    """Grids of zeros of several sizes and notations."""
    out = []
    for seed in range(members):
        rng = random.Random(3000 + seed)
        rows, cols = rng.randint(3, 32), rng.randint(3, 32)
        style = _STYLES[seed % len(_STYLES)]
        out.append(_matrix_reply(rng, f"{rows}x{cols} zero grid ({style}, seed {seed})",
                                 f"{rows}x{cols} zero matrix", [[0] * cols] * rows, style))
    return out


def identity_matrices(members: int = MEMBERS) -> list[LegitReply]:
    """Identity matrices of several sizes and notations."""
    out = []
    for seed in range(members):
        rng = random.Random(4000 + seed)
        size = rng.randint(3, 24)
        style = _STYLES[seed % len(_STYLES)]
        cells = [[1 if i == j else 0 for j in range(size)] for i in range(size)]
        out.append(_matrix_reply(rng, f"{size}x{size} identity ({style}, seed {seed})",
                                 f"{size}x{size} identity matrix", cells, style))
    return out


# ---------------------------------------------------------- arrays of one thing


_RECORDS: list[dict[str, Any]] = [
    {"status": "pending", "retries": 0, "owner": None},
    {"role": "viewer", "active": True},
    {"sku": "SEAT-PRO", "qty": 1, "unit_price": 12.5},
    {"task": "Review the contract draft", "done": False},
    {"name": "", "email": "", "phone": ""},
    {"type": "placeholder", "value": None, "note": "fill in before import"},
    {"x": 0, "y": 0, "z": 0},
]


def _yaml(records: list[dict[str, Any]]) -> str:
    def scalar(v: Any) -> str:
        return "null" if v is None else str(v).lower() if isinstance(v, bool) else \
            json.dumps(v) if isinstance(v, str) and (not v or " " in v) else str(v)
    lines = []
    for record in records:
        for k, (key, value) in enumerate(record.items()):
            lines.append(f"{'- ' if k == 0 else '  '}{key}: {scalar(value)}")
    return "\n".join(lines)


def identical_object_arrays(members: int = MEMBERS) -> list[LegitReply]:
    """A JSON (or YAML) array of identical objects: a seed file, a form's blank rows."""
    out = []
    for seed in range(members):
        rng = random.Random(5000 + seed)
        record = _RECORDS[seed % len(_RECORDS)]
        count = rng.randint(5, 60)
        records = [dict(record) for _ in range(count)]
        style = ["indent", "compact", "yaml"][seed % 3]
        if style == "yaml":
            text = f"```yaml\n{_yaml(records)}\n```"
        elif style == "indent":
            text = f"```json\n{json.dumps(records, indent=2)}\n```"
        else:
            text = json.dumps(records)
        content = f"Here are {count} default entries to start from:\n\n{text}\n\nEdit each " \
                  "one before you import the file."
        out.append(LegitReply(f"{count} identical objects ({style}, seed {seed})",
                              content=content, reasoning="They want a seed file with "
                              f"{count} default entries; all entries start the same."))
    return out


def _arguments_reply(rng: random.Random, name: str, extra_key: str, value: Any) -> LegitReply:
    tool = rng.choice(["change_plan", "send_email"])
    account = _account(rng)
    if tool == "change_plan":
        arguments = {"account_id": account, "plan": rng.choice(_PLANS), extra_key: value}
    else:
        arguments = {"account_id": account, "subject": "Your seats",
                     "body": "Your plan now has the seats listed below.", extra_key: value}
    return LegitReply(name, reasoning=f"Set every seat's {extra_key} the same way.",
                      tool_calls=[_call(tool, **arguments)], finish_reason="tool_calls",
                      expects_tool_call=True)


def identical_objects_in_arguments(members: int = MEMBERS) -> list[LegitReply]:
    """A tool call whose argument is an array of identical objects."""
    out = []
    for seed in range(members):
        rng = random.Random(6000 + seed)
        record = _RECORDS[seed % len(_RECORDS)]
        count = rng.randint(8, 120)
        out.append(_arguments_reply(rng, f"tool call with {count} identical objects "
                                    f"(seed {seed})", "line_items", [dict(record)] * count))
    return out


_ONE_VALUES: list[Any] = [0, False, None, "pending", 25, 1.0, "read-only", True, "", -1]


def one_value_arrays_in_arguments(members: int = MEMBERS) -> list[LegitReply]:
    """A tool call whose argument is a long array of one value."""
    out = []
    for seed in range(members):
        rng = random.Random(7000 + seed)
        value = _ONE_VALUES[seed % len(_ONE_VALUES)]
        count = rng.randint(20, 500)
        key = rng.choice(["seat_limits", "flags", "permissions", "defaults", "quotas"])
        out.append(_arguments_reply(rng, f"tool call with {count} x {value!r} (seed {seed})",
                                    key, [value] * count))
    return out


# ------------------------------------------------------------ rounds and refrains


_ROUNDS = {
    "Row, Row, Row Your Boat": ["Row, row, row your boat,", "Gently down the stream.",
                                "Merrily, merrily, merrily, merrily,", "Life is but a dream."],
    "Frère Jacques": ["Frère Jacques, frère Jacques,", "Dormez-vous? Dormez-vous?",
                      "Sonnez les matines, sonnez les matines.",
                      "Ding, dang, dong. Ding, dang, dong."],
    "Are You Sleeping": ["Are you sleeping, are you sleeping,", "Brother John, Brother John?",
                         "Morning bells are ringing, morning bells are ringing.",
                         "Ding, dang, dong. Ding, dang, dong."],
    "Three Blind Mice": ["Three blind mice, three blind mice,",
                         "See how they run, see how they run.",
                         "They all ran after the farmer's wife,",
                         "Who cut off their tails with a carving knife.",
                         "Did you ever see such a sight in your life,", "As three blind mice?"],
    "London's Burning": ["London's burning, London's burning,",
                         "Fetch the engines, fetch the engines.", "Fire, fire! Fire, fire!",
                         "Pour on water, pour on water."],
    "Hey, Ho, Nobody Home": ["Hey, ho, nobody home,", "Meat nor drink nor money have I none,",
                             "Yet will I be merry.", "Hey, ho, nobody home."],
}
_LABELS = ["Voice {i}:", "Part {i} (enters after the first line):", "Group {letter}:",
           "{ordinal} voice:", ""]
_ORDINALS = ["First", "Second", "Third", "Fourth", "Fifth"]


def rounds(members: int = MEMBERS) -> list[LegitReply]:
    """A round written out for its voices, each singing the same verse."""
    out = []
    titles = list(_ROUNDS)
    for seed in range(members):
        rng = random.Random(8000 + seed)
        title = titles[seed % len(titles)]
        verse = "\n".join(_ROUNDS[title])
        voices = rng.randint(2, 4)
        label = _LABELS[seed % len(_LABELS)]
        parts = []
        for i in range(1, voices + 1):
            tag = label.format(i=i, letter="ABCD"[i - 1], ordinal=_ORDINALS[i - 1])
            parts.append(f"{tag}\n{verse}" if tag else verse)
        if rng.random() < 0.4:
            parts.append(f"All together:\n{verse}")
        content = (f"Here is \"{title}\" written out as a {voices}-part round; each voice "
                   "starts when the one before it reaches the second line.\n\n"
                   + "\n\n".join(parts))
        out.append(LegitReply(f"round: {title}, {voices} voices (seed {seed})",
                              content=content, reasoning="Write the round out for the "
                              "voices so the choir can read its part."))
    return out


_CLEMENTINE_CHORUS = ("Oh my darling, oh my darling, oh my darling, Clementine!\n"
                      "You are lost and gone forever, dreadful sorry, Clementine.")
_CLEMENTINE_VERSES = [
    "In a cavern, in a canyon, excavating for a mine,\n"
    "Dwelt a miner forty-niner, and his daughter Clementine.",
    "Light she was and like a fairy, and her shoes were number nine,\n"
    "Herring boxes, without topses, sandals were for Clementine.",
    "Drove she ducklings to the water, every morning just at nine,\n"
    "Hit her foot against a splinter, fell into the foaming brine.",
    "Ruby lips above the water, blowing bubbles soft and fine,\n"
    "But alas, I was no swimmer, so I lost my Clementine.",
]
_CHORUSES = [
    "So sing along, the harbour's calling,\nsing along, the tide is high,\n"
    "we'll be home before the morning,\nwe'll be home before the morning light.",
    "Turn the wheel and raise the lantern,\nturn the wheel and let it shine,\n"
    "every road leads back to Marlow,\nevery road leads home in time.",
    "Hey la, hey lo, the river's rolling,\nhey la, hey lo, the barley's tall,\n"
    "carry me down to the valley,\ncarry me home before the fall.",
]
_VERSE_LINES = [
    "The baker rose before the sun", "and lit the ovens one by one",
    "The miller counted sacks of grain", "and cursed the wind and blessed the rain",
    "A fiddler played at Sarah's door", "until the floorboards asked for more",
    "The ferryman had seen it all", "the spring flood and the autumn squall",
    "We packed the cart with salt and rope", "and half a loaf and twice the hope",
    "The schoolhouse bell rang out at eight", "the children ran and none were late",
    "Old Tom came down the hill at dusk", "with apples and a broken tusk",
    "The lighthouse keeper wrote a song", "for sailors who had waited long",
]


def refrains(members: int = MEMBERS) -> list[LegitReply]:
    """Songs whose chorus comes back after every verse."""
    out = []
    for seed in range(members):
        rng = random.Random(9000 + seed)
        if seed % 4 == 0:
            verses = _CLEMENTINE_VERSES[:rng.randint(2, 4)]
            chorus, title = _CLEMENTINE_CHORUS, "Clementine"
            if seed % 8 == 4:  # sung with the chorus first, as some do
                verses = [chorus, *verses]
        else:
            chorus = _CHORUSES[seed % len(_CHORUSES)]
            title = f"song {seed}"
            verses = []
            for _ in range(rng.randint(3, 6)):
                pair = rng.randrange(0, len(_VERSE_LINES), 2)
                other = rng.randrange(0, len(_VERSE_LINES), 2)
                verses.append("\n".join(_VERSE_LINES[pair:pair + 2]
                                        + _VERSE_LINES[other:other + 2]))
        label = rng.choice(["Chorus:", "(Chorus)", "Refrain:", ""])
        parts = []
        for k, verse in enumerate(verses, start=1):
            parts += [f"Verse {k}:\n{verse}" if label else verse,
                      f"{label}\n{chorus}" if label else chorus]
        out.append(LegitReply(f"refrain: {title}, {len(verses)} verses (seed {seed})",
                              content="\n\n".join(parts),
                              reasoning="Write the full lyrics with the chorus after each "
                              "verse, as it is sung."))
    return out


# ----------------------------------------------------- markup talked about, not leaked


_SPECIALS = ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<|im_start|>", "<|im_end|>",
             "<|endoftext|>", "<｜User｜>", "<｜Assistant｜>", "<｜tool▁calls▁begin｜>"]
_TALK: list[Callable[[random.Random, str], str]] = [
    lambda r, t: ("DeepSeek puts its reasoning between <think> and </think> tags, and the "
                  "chat template strips them before the answer is shown."),
    lambda r, t: ("The reasoning parser splits the output at </think>: everything before it "
                  "goes to `reasoning`, everything after it to `content`."),
    lambda r, t: (f"A tokenizer's BOS token is added once per prompt; for DeepSeek it is "
                  f"<｜begin▁of▁sentence｜>, and {t} is another special token you will meet."),
    lambda r, t: f"Each turn ends with `{t}`, which the server strips before streaming.",
    lambda r, t: (f'Search the logs for the string "{t}": a reply that shows it was not '
                  "decoded with skip_special_tokens."),
    lambda r, t: ("The model closes its reasoning with </think> and then writes the answer; "
                  "a stray <think> tag in the answer means the parser missed the split."),
    lambda r, t: ("Here is how the chat template lays out a conversation:\n\n```jinja\n"
                  "{{ bos_token }}{% for m in messages %}<｜{{ m.role }}｜>{{ m.content }}"
                  "{% endfor %}<｜Assistant｜><think>\n```\n\nThe BOS token comes first, "
                  "then each message after its role token."),
    lambda r, t: ("```python\nfrom transformers import AutoTokenizer\n\ntok = AutoTokenizer."
                  "from_pretrained('deepseek-ai/DeepSeek-V4-Flash')\nprint(tok.bos_token)  "
                  f"# {t}\nprint(tok.convert_tokens_to_ids('</think>'))\n```\n\nThe first "
                  "line prints the BOS token, the second the id of the close-think tag."),
    lambda r, t: ("DeepSeek-V4 writes a tool call as DSML markup: a <｜DSML｜function_calls> "
                  "block holds one <｜DSML｜invoke> element per call, and each argument is a "
                  "<｜DSML｜parameter> element. For example:\n\n```\n<｜DSML｜function_calls>\n"
                  "<｜DSML｜invoke name=\"get_account\">\n<｜DSML｜parameter name=\"account_id\" "
                  "string=\"true\">XEHM4B</｜DSML｜parameter>\n</｜DSML｜invoke>\n"
                  "</｜DSML｜function_calls>\n```\n\nvLLM's tool parser turns that block into "
                  "`tool_calls`."),
    lambda r, t: ("In ChatML every message is wrapped as `<|im_start|>role` ... `<|im_end|>`:"
                  "\n\n```\n<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user"
                  "\nHi<|im_end|>\n<|im_start|>assistant\n```"),
    lambda r, t: (f"| token | meaning |\n|---|---|\n| `{t}` | a special token |\n"
                  "| `<think>` | opens the reasoning |\n| `</think>` | closes it |"),
    lambda r, t: (f"The special token {t} marks a boundary the model learned; if it shows up "
                  "in a reply, check that the server decodes with skip_special_tokens."),
    lambda r, t: ("If the answer still contains the close tag (</think>), the reasoning "
                  "parser is not enabled; start vLLM with --reasoning-parser deepseek_v4."),
    lambda r, t: (f"Ending a turn, the model writes {t} and the server stops there."),
]
_REASONING_TALK = [
    "The user asks what the </think> tag does in DeepSeek's output.",
    "They want to know why {t} appears in their logs; it is a special token.",
    "So the question is about the <think> and </think> tags and how the parser uses them.",
]


def markup_talk(members: int = MEMBERS + 5) -> list[LegitReply]:
    """Answers about think tags, special tokens, chat templates and DSML markup."""
    out = []
    for seed in range(members):
        rng = random.Random(10_000 + seed)
        token = _SPECIALS[seed % len(_SPECIALS)]
        sentences = [_TALK[(seed + k) % len(_TALK)](rng, token) for k in range(rng.randint(1, 3))]
        reasoning = _REASONING_TALK[seed % len(_REASONING_TALK)].format(t=token)
        out.append(LegitReply(f"markup talked about ({token}, seed {seed})",
                              content="\n\n".join(sentences), reasoning=reasoning))
    return out


FAMILIES: dict[str, Callable[[], list[LegitReply]]] = {
    "reasoning row walks": reasoning_row_walks,
    "reasoning invoice walks": reasoning_invoice_walks,
    "zero grids": zero_grids,
    "identity matrices": identity_matrices,
    "identical object arrays": identical_object_arrays,
    "identical objects in arguments": identical_objects_in_arguments,
    "one-value arrays in arguments": one_value_arrays_in_arguments,
    "rounds": rounds,
    "refrains": refrains,
    "markup talked about": markup_talk,
}


def honest_replies() -> list[LegitReply]:
    """Every member of every family."""
    return [reply for family in FAMILIES.values() for reply in family()]
