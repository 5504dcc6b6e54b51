"""Helpers over a conversation in the Anthropic Messages format (a list of dicts)."""

from typing import Any

Message = dict[str, Any]


def blocks(message: Message) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content or [])


def text_of(content: list[dict[str, Any]] | str) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(b["text"] for b in content if b.get("type") == "text" and b.get("text"))


def tool_uses(content: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [b for b in content if b.get("type") == "tool_use"]


def text_before(content: list[dict[str, Any]], tool_use_id: str) -> str:
    """What the model said in the same message before it asked for this tool."""
    said = []
    for block in content:
        if block.get("type") == "tool_use" and block.get("id") == tool_use_id:
            break
        if block.get("type") == "text" and block.get("text"):
            said.append(block["text"])
    return "\n".join(said)


def last_assistant_index(messages: list[Message]) -> int | None:
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].get("role") == "assistant":
            return i
    return None


def unresolved_tool_uses(messages: list[Message]) -> list[dict[str, Any]]:
    """The tool uses of the last assistant message that have no tool_result yet, in order.

    Resuming after any pause starts from these, so a tool that already ran never runs again.
    """
    index = last_assistant_index(messages)
    if index is None:
        return []
    resolved = {
        b.get("tool_use_id")
        for m in messages[index + 1 :]
        for b in blocks(m)
        if b.get("type") == "tool_result"
    }
    return [u for u in tool_uses(blocks(messages[index])) if u["id"] not in resolved]


def add_user_text(messages: list[Message], text: str) -> None:
    if messages and messages[-1].get("role") == "user":
        messages[-1]["content"] = blocks(messages[-1]) + [{"type": "text", "text": text}]
    else:
        messages.append({"role": "user", "content": [{"type": "text", "text": text}]})


def add_tool_result(
    messages: list[Message], tool_use_id: str, content: str, is_error: bool = False
) -> None:
    """Append a tool_result; results answering one assistant message share one user message."""
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_use_id, "content": content}
    if is_error:
        block["is_error"] = True
    if messages and messages[-1].get("role") == "user":
        messages[-1]["content"] = blocks(messages[-1]) + [block]
    else:
        messages.append({"role": "user", "content": [block]})


def order_results(messages: list[Message]) -> None:
    """Put the tool_results answering the last assistant message in the order of its calls.

    Results arrive in the order their calls finish (agent instances run side by side); the
    model gets them back in the order it asked.
    """
    index = last_assistant_index(messages)
    if index is None or index + 1 >= len(messages):
        return
    order = {u["id"]: n for n, u in enumerate(tool_uses(blocks(messages[index])))}
    reply = messages[index + 1]
    content = blocks(reply)
    results = [b for b in content if b.get("type") == "tool_result"]
    if len(results) < 2:
        return
    others = [b for b in content if b.get("type") != "tool_result"]
    results.sort(key=lambda b: order.get(b.get("tool_use_id"), len(order)))
    reply["content"] = results + others
