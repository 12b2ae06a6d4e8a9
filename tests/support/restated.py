"""Loops by meaning, and honest replies that repeat a shape, generated with varied values.

Broken (`BROKEN`, each a loop a verbatim rule does not see):
- restatement: the same few sentences said again and again in other words (synonyms
  drawn anew each time, clauses in either order), until the end;
- stepped: counting on without ending ("Try x = 7: that gives 23, not 40. What about
  x = 8? ...", "Step 12: check the log again ..."), worded anew each time;
- answer_thrice: a whole answer written three or four times, exactly or lightly
  reworded (a word or two changed per sentence); `answer_twice`, written twice, is one
  copy and no loop by the project's rules;
- near_duplicate: one paragraph again and again with a small edit each time.

Honest (`HONEST`, each with the request it answers, so the record carries the
request's values as a run records them):
- table_rows: rows of the request's records (ids, names, amounts), then a total;
- consecutive_ids: the request's consecutive ids walked one sentence each, then a count;
- arithmetic: a running total over the request's amounts, step by step, to the answer;
- code: functions of one shape for the request's fields;
- similar_items: a list of items of one kind, each with its own properties;
- restate_once: a reasoning that restates the question once and answers.

Every family takes (seed, chars): the text grows to about `chars` characters.
"""

from __future__ import annotations

import random
import re
import string
from collections.abc import Callable
from typing import Any

from tests.support.honest_requests import Case

_ALT = re.compile(r"\{([^{}]*)\}")


def pick(template: str, rng: random.Random, **values: Any) -> str:
    """`{a|b|c}` picks one alternative; `{name}` (no bar) is a value."""
    def choose(m: re.Match[str]) -> str:
        body = m.group(1)
        if "|" in body:
            return rng.choice(body.split("|"))
        return str(values[body])
    out, before = template, ""
    while out != before:  # innermost first: "{|, still not {target}}"
        before, out = out, _ALT.sub(choose, out)
    return re.sub(r"\s+([,.?!:])", r"\1", re.sub(r" {2,}", " ", out)).strip()


def _code(rng: random.Random) -> str:
    letters = rng.choices(string.ascii_uppercase, k=4)
    return "".join(letters) + str(rng.randint(10, 99))


# A topic: what the request asks (the values it names), and the few meanings a loop
# restates, each with its wordings.
TOPICS: dict[str, tuple[str, list[list[str]]]] = {
    "plan": ("Move account {acc} to the {plan} plan, and cancel it at the end of the term.", [
        ["{Wait|Hold on|Hmm|Okay}, the {user|customer|client} {wants|would like|is asking} to "
         "{upgrade|move|switch} account {acc} to the {plan} plan{| first}.",
         "To the {plan} plan{|, that is}: {that is where|this is where} the {user|customer|client} "
         "{wants|would like} account {acc} {moved|upgraded|switched}."],
        ["{After that|Then|Afterwards}, {they|the user|the customer} {want|would like|intend} "
         "to cancel {it|the subscription|the account}{| later}{| at the end of the term}.",
         "{They|The customer|The user} {also|additionally} {want|wish} {it|the subscription} "
         "cancelled {afterwards|after that|later on}."],
        ["So I {should|need to|must} call change_plan {first|before anything else} with "
         "{account|the account} {acc}{| and plan {plan}}.",
         "{First|Before anything else}, change_plan {is the call|is what I call|comes first} "
         "for {account|the account} {acc}."],
        ["{Let me|I will|I'll} {re-read|look at|check} the request {again|once more|one more "
         "time} to {be sure|make sure|confirm} {nothing is missing|I have it right}.",
         "{To be sure|To make sure|To confirm}, {let me|I will|I'll} {re-read|go over} "
         "{the request|what was asked} {again|once more}."],
    ]),
    "date": ("On which weekday does {date} fall? The meeting is in room {room}.", [
        ["{The question|The user|They} {asks|wants to know|is asking} {which|what} weekday "
         "{date} {is|falls on}.",
         "{Which|What} weekday {is|falls on} {date}{|: that is the question}?"],
        ["{I know|I recall|We know} that January 1 of that year {was|is} a "
         "{Thursday|Thursday, I think}, so {I can|let me} count {forward|on} from {there|it}.",
         "{Counting|Let me count} {forward|on} from January 1{|, which was a Thursday}, "
         "{I should|I can} {reach|get to} {date}."],
        ["{But|However|Hmm}, {I need to|I must|let me} {check|verify|be careful about} "
         "whether {it is|that year is} a leap year {first|before counting}.",
         "{A leap year|Whether the year is a leap year} {changes|matters for|affects} "
         "the count, so {let me|I must|I should} {check|verify} {it|that} {first|again}."],
        ["{The meeting|It} is in room {room}, {but|though} {that|the room} "
         "{does not|doesn't} {change|affect|matter for} the {weekday|day}.",
         "Room {room} {is|is only} where the meeting is{|; it does not change the day}."],
    ]),
    "bug": ("The function {fn} returns None for input {n}; find the bug.", [
        ["{The|This} function {fn} returns None {for|when given} {input|the input} {n}, "
         "{so|which means} {a|some} branch {has no|lacks a} return.",
         "{For|With} {input|the input} {n}, {fn} {ends up|falls through} "
         "{without|with no} return{| statement}."],
        ["{Let me|I'll|I will} {trace|walk through|follow} the {loop|code|branches} "
         "{again|once more} {with|for} {n}.",
         "{Tracing|Walking through|Following} {the loop|the code|the branches} {with|for} "
         "{n} {again|once more}{| should show it}."],
        ["{The|That} {else|final|last} branch {might|may|could} be the one {missing|without} "
         "{the|a} return{| statement}.",
         "{Maybe|Perhaps|Possibly} {it is|the bug is} {the|that} {else|final} branch "
         "{that|which} {misses|lacks} {the|a} return."],
    ]),
}


def _topic(seed: int) -> tuple[str, dict[str, Any], list[list[str]]]:
    rng = random.Random(f"topic/{seed}")
    name = sorted(TOPICS)[seed % len(TOPICS)]
    request, meanings = TOPICS[name]
    values = {"acc": _code(rng), "plan": rng.choice(("pro", "business", "enterprise")),
              "date": f"{rng.choice(('March', 'May', 'June', 'October'))} "
                      f"{rng.randint(2, 28)}, {rng.randint(2024, 2031)}",
              "room": rng.randint(100, 999), "fn": rng.choice(("parse", "merge", "score")),
              "n": rng.randint(3, 90)}
    return pick(request, rng, **values), values, meanings


#: A generated reply with the request it answers (the honest families' own type).
Reply = Case


# ------------------------------------------------------------------------ broken


def restatement(seed: int, chars: int) -> tuple[str, str]:
    """(request, text): an honest opening, then the topic's meanings restated in turn,
    worded anew each time, to `chars` characters."""
    request, values, meanings = _topic(seed)
    rng = random.Random(f"restatement/{seed}/{chars}")
    out = [pick(meanings[0][0], rng, **values), "Let me think about what to do."]
    order = list(range(len(meanings)))
    while sum(map(len, out)) < chars:
        if rng.random() < 0.3:
            rng.shuffle(order)
        for k in order:
            out.append(pick(rng.choice(meanings[k]), rng, **values))
    return request, " ".join(out)


STEPS = [
    "{Try|Let me try|What about|Check} x = {x}: {that gives|it gives|we get} {f}, "
    "{not|which is not|and that isn't} {target}{.|. No.|, no.}",
    "{So|Then|Next}, x = {x} {gives|yields|makes} {f}{|, still not {target}}{.|?}",
    "{Step|Check|Attempt} {k}: {look at|test|compare} the {log|output|result} {again|once "
    "more}{| for x = {x}}; {nothing|no change|still nothing} {there|yet}.",
]


def stepped(seed: int, chars: int) -> tuple[str, str]:
    """(request, text): counting on (x, a value computed from x, a step number), worded
    anew each time, never reaching the target."""
    rng = random.Random(f"stepped/{seed}/{chars}")
    a, b, d = rng.randint(2, 9), rng.randint(1, 30), rng.choice((1, 1, 2, 5))
    x, target = rng.randint(0, 20), rng.randint(1000, 5000) * 2 + 1
    request = f"Find an x with {a}x + {b} = {target + (1 if a % 2 else 0)}."
    out = [f"We need {a}x + {b} to reach the target; let me search."]
    k = 1
    while sum(map(len, out)) < chars:
        out.append(pick(rng.choice(STEPS[:2] if k % 3 else STEPS), rng, x=x, f=a * x + b,
                        target=target, k=k))
        x += d
        k += 1
    return request, " ".join(out)


SYNONYMS = {"account": "subscription", "plan": "tier", "renews": "is renewed",
            "paid": "settled", "needed": "required", "customer": "client", "month": "period",
            "invoice": "bill", "since": "from", "full": "total", "change": "switch"}
ANSWER = [
    "The account {acc} is on the {plan} plan since {month}.",
    "It renews on {date} for {price} dollars a month.",
    "The invoice for {month} was paid in full by {method}.",
    "No further action is needed from the customer at this time.",
    "A plan change takes effect at the start of the next billing period.",
    "Support can be reached by email if anything about the account looks wrong.",
    "The {plan} plan includes {seats} seats and priority support.",
    "Usage this month is {usage} percent of the included quota.",
]


def _answer(rng: random.Random, sentences: int) -> tuple[str, list[str]]:
    values = {"acc": _code(rng), "plan": rng.choice(("pro", "business", "enterprise")),
              "month": rng.choice(("March", "April", "May")), "price": rng.randint(9, 499),
              "date": f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
              "method": rng.choice(("card", "bank transfer")), "seats": rng.randint(2, 90),
              "usage": rng.randint(10, 95)}
    chosen = rng.sample(ANSWER, sentences)
    request = (f"What is the state of account {values['acc']}? It is on {values['plan']}, "
               f"renews {values['date']} at {values['price']}, {values['seats']} seats, "
               f"usage {values['usage']}.")
    return request, [pick(s, rng, **values) for s in chosen]


def reword(sentence: str, rng: random.Random, edits: int) -> str:
    """The sentence with up to `edits` words swapped for a synonym (or a filler dropped)."""
    words = sentence.split()
    places = [i for i, w in enumerate(words) if w.strip(".,").lower() in SYNONYMS]
    for i in rng.sample(places, min(edits, len(places))):
        core = words[i].strip(".,")
        words[i] = words[i].replace(core, SYNONYMS[core.lower()])
    if edits and rng.random() < 0.3 and "the" in words:
        words.remove("the")
    return " ".join(words)


def answer_again(seed: int, chars: int, copies: int) -> tuple[str, str]:
    """(request, text): an answer written `copies` times, exactly or with a word or two
    changed per sentence; `chars` sets its length (4 to 8 sentences)."""
    rng = random.Random(f"answer_again/{seed}/{chars}/{copies}")
    request, sentences = _answer(rng, min(8, max(4, chars // 200)))
    edits = rng.choice((0, 1, 1, 2))
    text = [" ".join(sentences)]
    text += [" ".join(reword(s, rng, edits) for s in sentences) for _ in range(copies - 1)]
    joiner = rng.choice((" ", "\n\n", "\n\nTo restate: "))
    return request, joiner.join(text)


def near_duplicate(seed: int, chars: int) -> tuple[str, str]:
    """(request, text): one paragraph again and again, each time with a small edit (a
    synonym, a dropped word, two sentences swapped), to `chars` characters."""
    rng = random.Random(f"near_duplicate/{seed}/{chars}")
    request, sentences = _answer(rng, rng.randint(3, 5))
    out: list[str] = []
    while sum(map(len, out)) < chars:
        paragraph = [reword(s, rng, rng.randint(0, 2)) for s in sentences]
        if rng.random() < 0.3:
            i = rng.randrange(len(paragraph) - 1)
            paragraph[i], paragraph[i + 1] = paragraph[i + 1], paragraph[i]
        out.append(" ".join(paragraph))
    return request, "\n\n".join(out)


def answer_thrice(seed: int, chars: int) -> tuple[str, str]:
    """An answer written three or four times (see `answer_again`)."""
    return answer_again(seed, chars, 3 + seed % 2)


def answer_twice(seed: int, chars: int) -> tuple[str, str]:
    """An answer written twice: no loop by the project's rules (one copy; a reasoning
    written out twice is healthy in tests/loadgen/judge/reply/test_verdicts.py), counted in
    docs/testing.md, not in `BROKEN`."""
    return answer_again(seed, chars, 2)


Maker = Callable[[int, int], tuple[str, str]]
BROKEN: dict[str, Maker] = {"restatement": restatement, "stepped": stepped,
                            "answer_thrice": answer_thrice, "near_duplicate": near_duplicate}
#: The families that loop until max_tokens (the others are written and stop).
RUNS_ON = {"restatement", "stepped", "near_duplicate"}


def call(name: str, **arguments: Any) -> dict[str, Any]:
    import json

    return {"id": f"call-{name}", "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)}}


def broken_reply(family: str, seed: int, chars: int, place: str, finish: str) -> Reply:
    """The family's text in the reasoning (then a short answer, or nothing when cut) or
    the content (after a short reasoning), with this finish."""
    request, text = BROKEN[family](seed, chars)
    name = f"{family} ({place}, {finish}, {seed}, {chars})"
    if place == "reasoning":
        content = "" if finish == "length" else "Done: the request is handled as asked."
        return Reply(name, request, reasoning=text, content=content, finish_reason=finish)
    return Reply(name, request, reasoning="Answer the question from the request.",
                 content=text, finish_reason=finish)


# ------------------------------------------------------------------------ honest


NAMES = ("Alice Moreau", "Bilal Haddad", "Chen Wei", "Dara Okafor", "Elif Yilmaz",
         "Farid Nasser", "Greta Lind", "Hugo Silva", "Ines Duarte", "Jonas Berg",
         "Kaito Mori", "Lena Novak", "Mateo Ruiz", "Nia Mensah", "Omar Aziz", "Priya Nair",
         "Quinn Walsh", "Rosa Ferri", "Sven Olsen", "Tara Byrne", "Umar Sheikh", "Vera Pavlova")


def _records(rng: random.Random, n: int, consecutive: bool = False) -> list[dict[str, Any]]:
    start = rng.randint(1000, 9000)
    return [{"id": start + i if consecutive else rng.randint(1000, 99999),
             "name": NAMES[i % len(NAMES)],
             "amount": f"{rng.randint(5, 900)}.{rng.randint(0, 99):02d}",
             "status": rng.choice(("active", "paused", "overdue"))} for i in range(n)]


def _listing(records: list[dict[str, Any]]) -> str:
    return "\n".join(f"- id {r['id']}, {r['name']}, {r['amount']} USD, {r['status']}"
                     for r in records)


def table_rows(seed: int, chars: int) -> Reply:
    rng = random.Random(f"table_rows/{seed}/{chars}")
    records = _records(rng, max(3, min(60, chars // 70)))
    request = "List every customer below with id, amount and status, then the total:\n" + \
        _listing(records)
    rows = [pick("{Row|Record|Entry} {k}: id {id}, {name}, amount {amount} USD, status "
                 "{status}.", rng, k=k, **r) for k, r in enumerate(records, start=1)]
    total = sum(float(r["amount"]) for r in records)
    reasoning = "I walk the records in order, one line each, then add up the amounts."
    content = "\n".join(rows) + f"\n\nThe total is {total:.2f} USD over {len(rows)} customers."
    return Reply(f"table_rows ({seed}, {chars})", request, reasoning=reasoning, content=content)


def consecutive_ids(seed: int, chars: int) -> Reply:
    rng = random.Random(f"consecutive_ids/{seed}/{chars}")
    records = _records(rng, max(3, min(60, chars // 90)), consecutive=True)
    status = rng.choice(("active", "paused"))
    for r in records:
        r["status"] = status
    request = "Check each of these orders and say whether it is still open:\n" + \
        _listing(records)
    lines = [pick("{Order|Ticket} {id} {is|remains} {status}, so it {is|stays} open for "
                  "now.", rng, **r) for r in records]
    reasoning = ("The request lists orders with consecutive ids; I go through them one by "
                 "one.\n" + "\n".join(lines) + f"\nAll {len(records)} orders are {status}.")
    return Reply(f"consecutive_ids ({seed}, {chars})", request, reasoning=reasoning,
                 content=f"All {len(records)} orders are still open.")


def arithmetic(seed: int, chars: int) -> Reply:
    rng = random.Random(f"arithmetic/{seed}/{chars}")
    amounts = [rng.randint(100, 9999) for _ in range(max(3, min(80, chars // 60)))]
    request = "Add up these invoice amounts: " + ", ".join(map(str, amounts)) + "."
    total, steps = 0, []
    for k, a in enumerate(amounts, start=1):
        steps.append(pick("{Step|Then} {k}: {add|plus} {a} to {t} {to get|gives|makes} "
                          "{s}.", rng, k=k, a=a, t=total, s=total + a))
        total += a
    reasoning = "I add the amounts one at a time.\n" + "\n".join(steps) + \
        f"\nSo the sum is {total}."
    return Reply(f"arithmetic ({seed}, {chars})", request, reasoning=reasoning,
                 content=f"The amounts add up to {total}.")


FIELDS = ("name", "email", "address", "phone", "plan", "seats", "owner", "region", "status",
          "balance", "currency", "created", "updated", "tier", "notes", "country", "city",
          "zip", "vat", "website", "language", "timezone", "manager", "team")


def code(seed: int, chars: int) -> Reply:
    rng = random.Random(f"code/{seed}/{chars}")
    fields = rng.sample(FIELDS, max(3, min(len(FIELDS), chars // 120)))
    cls = rng.choice(("Account", "Customer", "Order"))
    request = f"Write a Python class {cls} with a getter and setter for: " + \
        ", ".join(fields) + "."
    body = [f"class {cls}:", "    def __init__(self) -> None:"]
    body += [f"        self._{f} = None" for f in fields]
    for f in fields:
        body += ["", "    @property", f"    def {f}(self):", f"        return self._{f}",
                 "", f"    @{f}.setter", f"    def {f}(self, value):",
                 f"        self._{f} = value"]
    content = "Here is the class:\n\n```python\n" + "\n".join(body) + "\n```\n" \
        f"Each of the {len(fields)} fields has a getter and a setter."
    return Reply(f"code ({seed}, {chars})", request,
                 reasoning="Write one property pair per field.", content=content)


ITEMS = [("apple", "red", "fiber"), ("banana", "yellow", "potassium"),
         ("kiwi", "brown", "vitamin C"), ("blueberry", "blue", "antioxidants"),
         ("orange", "orange", "vitamin C"), ("mango", "golden", "vitamin A"),
         ("grape", "purple", "resveratrol"), ("pear", "green", "copper"),
         ("cherry", "dark red", "melatonin"), ("lemon", "yellow", "citric acid"),
         ("plum", "violet", "sorbitol"), ("fig", "purple", "calcium"),
         ("papaya", "orange", "papain"), ("guava", "pink", "lycopene"),
         ("apricot", "amber", "beta carotene"), ("lime", "green", "limonene"),
         ("peach", "peach", "niacin"), ("date", "brown", "magnesium"),
         ("pomegranate", "crimson", "punicalagins"), ("coconut", "white", "manganese")]


def similar_items(seed: int, chars: int) -> Reply:
    rng = random.Random(f"similar_items/{seed}/{chars}")
    items = rng.sample(ITEMS, max(3, min(len(ITEMS), chars // 80)))
    request = "Name some fruits, with their colour and what each is rich in."
    lines = [pick("- {The|A} {fruit} is {colour} {and|,} {rich in|a good source of|high in} "
                  "{what}.", rng, fruit=f.title(), colour=c, what=w) for f, c, w in items]
    content = "Here are some fruits:\n" + "\n".join(lines) + \
        f"\n\nAll {len(items)} make a healthy snack."
    return Reply(f"similar_items ({seed}, {chars})", request, reasoning="List fruits.",
                 content=content)


def restate_once(seed: int, chars: int) -> Reply:
    request, values, meanings = _topic(seed)
    rng = random.Random(f"restate_once/{seed}/{chars}")
    first = pick(meanings[0][0], rng, **values)
    again = pick(meanings[0][1], rng, **values)
    middle = [pick(rng.choice(m), rng, **values) for m in meanings[1:]]
    reasoning = " ".join([first, *middle, "So, to restate the question:", again,
                          "I have what I need and will answer now."])
    return Reply(f"restate_once ({seed}, {chars})", request, reasoning=reasoning,
                 content="Done: here is the answer to the question as asked.")


HONEST: dict[str, Callable[[int, int], Reply]] = {
    "table_rows": table_rows, "consecutive_ids": consecutive_ids, "arithmetic": arithmetic,
    "code": code, "similar_items": similar_items, "restate_once": restate_once}
