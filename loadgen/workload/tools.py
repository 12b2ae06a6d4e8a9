"""The billing-assistant tool set shared by the tool-turn and long-context workloads."""

from __future__ import annotations

from typing import Any


def _fn(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": required},
        },
    }


_ACCOUNT = {"type": "string", "description": "Account id, six characters, e.g. XEHM4B."}

BILLING_TOOLS: list[dict[str, Any]] = [
    _fn("get_account", "Look up an account's plan, status and renewal date.",
        {"account_id": _ACCOUNT}, ["account_id"]),
    _fn("change_plan", "Move an account to another plan; takes effect immediately.",
        {"account_id": _ACCOUNT,
         "plan": {"type": "string", "enum": ["free", "pro", "business", "enterprise"]}},
        ["account_id", "plan"]),
    _fn("cancel_subscription", "Cancel an account's subscription.",
        {"account_id": _ACCOUNT,
         "effective": {"type": "string", "enum": ["immediately", "end_of_term"]},
         "reason": {"type": "string"}},
        ["account_id", "effective"]),
    _fn("send_email", "Send an email to the account owner.",
        {"account_id": _ACCOUNT, "subject": {"type": "string"}, "body": {"type": "string"}},
        ["account_id", "subject", "body"]),
]

SYSTEM_PROMPT = (
    "You are the billing assistant of Northwind Cloud. You act on customer accounts only "
    "through the tools you are given, one step at a time, and never claim an action you "
    "did not perform. When the user asks for several changes, perform the first one now."
)


def offered_tools(tools: list[dict[str, Any]] | None) -> dict[str, list[str]]:
    """What a request offered, as the verdicts check it: function name -> required keys."""
    offered: dict[str, list[str]] = {}
    for tool in tools or []:
        fn = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            params = fn.get("parameters")
            required = params.get("required") if isinstance(params, dict) else None
            offered[fn["name"]] = [str(k) for k in required] if isinstance(required,
                                                                           list) else []
    return offered


def forces_a_call(tool_choice: Any) -> bool:
    """`tool_choice` "required", or one named function: the reply must be a tool call."""
    return tool_choice == "required" or (
        isinstance(tool_choice, dict) and tool_choice.get("type") == "function")
