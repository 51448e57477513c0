"""Calls the demo's task tools from Python, on the official `mcp` SDK (2.3), over MCP 2026-07-28.

The SDK has no tasks extension of its own, but it has the extension points one needs: a
`ClientExtension` that claims the `resultType: "task"` answer of `tools/call` (and so declares
`io.modelcontextprotocol/tasks` on every request), and `session.send_request` for the `tasks/*`
methods with typed params and results.

    python tasks_client.py [URL] [--token alice] [--name Ada]
"""

import argparse
import asyncio
import sys
from typing import Any, Literal

import httpx2
import mcp_types as types
from mcp import Client
from mcp.client import ClaimContext, ClientExtension, ClientRequestContext, ClientSession, ResultClaim
from mcp.client.streamable_http import streamable_http_client

TERMINAL = ("completed", "failed", "cancelled")


class CreateTaskResult(types.Result):
    """What `tools/call` answers with a task: the task's fields, flat, with `resultType: "task"`."""

    result_type: Literal["task"]
    task_id: str
    status: str
    poll_interval_ms: int | None = None


class Task(types.Result):
    """What `tasks/get` answers: the task now, with its input requests, result or error."""

    task_id: str
    status: str
    status_message: str | None = None
    poll_interval_ms: int | None = None
    input_requests: types.InputRequests | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


class TaskParams(types.RequestParams):
    task_id: str


class UpdateTaskParams(TaskParams):
    input_responses: types.InputResponses


class GetTask(types.Request[TaskParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    name_param = "taskId"  # the Mcp-Name header carries the task id


class UpdateTask(types.Request[UpdateTaskParams, Literal["tasks/update"]]):
    method: Literal["tasks/update"] = "tasks/update"
    name_param = "taskId"


class CancelTask(types.Request[TaskParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    name_param = "taskId"


async def get_task(session: ClientSession, task_id: str) -> Task:
    return await session.send_request(GetTask(params=TaskParams(task_id=task_id)), Task)


async def follow(created: CreateTaskResult, ctx: ClaimContext) -> types.CallToolResult:
    """Polls the task to its end, answering its input requests with the client's own callbacks."""
    session, task_id = ctx.session, created.task_id
    print(f"{ctx.tool_name}: task {task_id} {created.status}")
    answered: set[str] = set()
    while True:
        task = await get_task(session, task_id)
        if task.status in TERMINAL:
            break
        asked = {k: r for k, r in (task.input_requests or {}).items() if k not in answered}
        if task.status == "input_required" and asked:
            print(f"{ctx.tool_name}: task {task_id} input_required ({task.status_message})")
            answers = {}
            for key, request in asked.items():
                context = ClientRequestContext(session=session, request_id=key, meta=None)
                answers[key] = await session.dispatch_input_request(context, request)
            answered.update(answers)
            params = UpdateTaskParams(task_id=task_id, input_responses=answers)
            await session.send_request(UpdateTask(params=params), types.EmptyResult)
        await asyncio.sleep((task.poll_interval_ms or 500) / 1000)
    print(f"{ctx.tool_name}: task {task_id} {task.status}")
    if task.status == "failed":
        raise RuntimeError(f"task {task_id} failed: {task.error}")
    if task.status == "cancelled":
        return types.CallToolResult(content=[], is_error=True)
    return types.CallToolResult.model_validate(task.result)


class Tasks(ClientExtension):
    """The tasks extension, client side: `tools/call` answers with a task are followed to the end."""

    identifier = "io.modelcontextprotocol/tasks"

    def claims(self):
        return [ResultClaim(result_type="task", model=CreateTaskResult, resolve=follow)]


async def main(url: str, token: str, name: str) -> None:
    async def elicit(_context, params: types.ElicitRequestParams) -> types.ElicitResult:
        print(f'  asked "{params.message}", answering {name}')
        return types.ElicitResult(action="accept", content={"name": name})

    headers = {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as http:
        transport = streamable_http_client(url, http_client=http)
        async with Client(transport, extensions=[Tasks()], elicitation_callback=elicit) as client:
            # `Client` asks `server/discover` first and falls back to `initialize` (2025-11-25)
            # when it fails; the extension's claim is only active on 2026-07-28.
            print(f"protocol {client.protocol_version}")
            if client.protocol_version != "2026-07-28":
                raise RuntimeError("this client speaks the tasks extension of 2026-07-28 only")

            # 1. A task that asks for input: call_tool follows it (see `follow`) and returns its result.
            result = await client.call_tool("greet", {})
            print(f"result: {result.content[0].text}")

            # 2. A task that runs until cancelled: take the task itself, cancel it, read it.
            created = await client.session.call_tool("wait_for_cancel", {}, allow_claimed=True)
            print(f"wait_for_cancel: task {created.task_id} {created.status}")
            params = TaskParams(task_id=created.task_id)
            await client.session.send_request(CancelTask(params=params), types.EmptyResult)
            task = await get_task(client.session, created.task_id)
            while task.status not in TERMINAL:
                await asyncio.sleep((task.poll_interval_ms or 500) / 1000)
                task = await get_task(client.session, created.task_id)
            print(f"wait_for_cancel: task {created.task_id} {task.status} ({task.status_message})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", nargs="?", default="http://127.0.0.1:3000/mcp")
    parser.add_argument("--token", default="alice", help="sent as Authorization: Bearer <token>")
    parser.add_argument("--name", default="Ada", help="the answer to greet's question")
    args = parser.parse_args()
    try:
        asyncio.run(main(args.url, args.token, args.name))
    except Exception as error:  # one line, not a traceback (anyio wraps errors in groups)
        while len(getattr(error, "exceptions", ())) == 1:
            error = error.exceptions[0]
        sys.exit(f"error: {type(error).__name__}: {error}")
