"""Token counts without a tokenizer, calibrated on the server's /tokenize when it has one."""

from __future__ import annotations

import httpx

# English prose through a BPE tokenizer of the DeepSeek/Llama families: ~4 chars/token.
DEFAULT_CHARS_PER_TOKEN = 4.0
CALIBRATION_TEXT = (
    "The quarterly infrastructure review covered storage growth, network egress, "
    "scheduled maintenance windows and the migration of billing records to the new "
    "ledger service. Several teams asked for more detailed capacity forecasts. "
) * 8


def estimate_tokens(text: str, chars_per_token: float = DEFAULT_CHARS_PER_TOKEN) -> int:
    return max(1, round(len(text) / chars_per_token))


async def calibrate_chars_per_token(
    http: httpx.AsyncClient, base_url: str, model: str, sample: str = CALIBRATION_TEXT
) -> float | None:
    """Chars per token measured by the server's tokenizer (vLLM's POST /tokenize).

    None when the server has no /tokenize or answers oddly: the estimate then stays.
    """
    try:
        resp = await http.post(
            f"{base_url}/tokenize", json={"model": model, "prompt": sample}, timeout=30.0
        )
        if resp.status_code != 200:
            return None
        data = resp.json()
        count = data.get("count") or len(data.get("tokens") or [])
    except (httpx.HTTPError, ValueError, AttributeError):
        return None
    if not isinstance(count, int) or count <= 0:
        return None
    return len(sample) / count
