"""The special tokens the server says its tokenizer has (GET /tokenizer_info).

The judge looks for a model's own special tokens in replies (`judge.leaks`); a
catalogue cannot know a model's private markers, and the scenario's
`verdicts.tokenizer` needs the model's files at hand. vLLM describes its tokenizer at
GET /tokenizer_info when started with `--enable-tokenizer-info-endpoint`: where a server
answers there, its tokens are added to the run's before anything is sent. Where it does
not (the endpoint off, an older release, another server), the run goes on with the files
and the catalogue, and run.json says where the tokens came from.
"""

from __future__ import annotations

import httpx

from loadgen.tokenizer_files import declared_by_server

#: A description of a tokenizer is a few hundred KB at most; a server that takes
#: longer than this to give it is read as one that has none.
TOKENIZER_INFO_TIMEOUT_S = 10.0


async def served_special_tokens(http: httpx.AsyncClient, base_url: str
                                ) -> tuple[str, ...] | None:
    """The special tokens `base_url` declares; None when it describes no tokenizer (no
    endpoint, an error, or an answer that is not a description)."""
    try:
        resp = await http.get(f"{base_url}/tokenizer_info", timeout=TOKENIZER_INFO_TIMEOUT_S)
    except httpx.HTTPError:
        return None
    if resp.status_code != 200:
        return None
    try:
        doc = resp.json()
    except ValueError:
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("tokenizer_class"), str):
        return None
    return declared_by_server(doc)
