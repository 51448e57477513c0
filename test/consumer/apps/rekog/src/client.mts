// The client side of the rekog app, as a user writes it: ESM, on nestjs-mcp-tasks/client, one
// URL for rekog's plain tool and the task tools alike.
// Usage: node dist/client.mjs <endpoint URL>; prints what happened as one JSON line.
import { connectTasksClient, TaskCancelledError } from 'nestjs-mcp-tasks/client';

const url = process.argv[2];
if (url === undefined) throw new Error('usage: client.mjs <url>');

/** What a rejected call was refused with, as the JSON-RPC error's code and message. */
async function refusal(call: Promise<unknown>): Promise<{ code?: unknown; message?: unknown }> {
  try {
    await call;
    return {};
  } catch (error) {
    const { code, message } = error as { code?: unknown; message?: unknown };
    return { code, message };
  }
}

const report: Record<string, unknown> = {};
const mcp = await connectTasksClient(url, {
  headers: { Authorization: 'Bearer alice-token' },
  onInput: {
    elicitation: async (params) => {
      report.asked = params.message;
      return { action: 'accept', content: { name: 'Ada' } };
    },
  },
});
const bob = await connectTasksClient(url, { headers: { Authorization: 'Bearer bob-token' } });
try {
  report.tools = (await mcp.listTools()).map((tool) => tool.name).sort();

  // rekog's own tool: an immediate result, no task.
  const echo = await mcp.callTool('echo', { text: 'from rekog' });
  report.echo = { isTask: echo.isTask, content: (await echo.result()).content };

  const greet = await mcp.callTool('greet', { greeting: 'Hello' });
  const statuses: string[] = [];
  greet.onStatus((task) => statuses.push(task.status));
  const result = await greet.result();
  report.greet = { taskId: greet.taskId, content: result.content, statuses };

  const waiting = await mcp.callTool('wait_for_cancel', {});
  await new Promise<void>((resolve) => {
    const stop = waiting.onStatus((task) => {
      if (task.statusMessage === 'Waiting to be cancelled') {
        queueMicrotask(() => stop());
        resolve();
      }
    });
  });
  // Another user can neither read nor cancel alice's task: to bob it does not exist.
  report.foreign = {
    read: await refusal(bob.getTask(waiting.taskId!)),
    cancel: await refusal(bob.cancelTask(waiting.taskId!)),
  };
  await waiting.cancel();
  const outcome = await waiting.outcome();
  let cancelledError = false;
  try {
    await waiting.result();
  } catch (error) {
    cancelledError = error instanceof TaskCancelledError;
  }
  report.cancel = { taskId: waiting.taskId, status: outcome.status, cancelledError };

  const invalid = await mcp.callTool('greet', { greeting: 42 });
  const refused = await invalid.result();
  report.invalid = { isTask: invalid.isTask, isError: refused.isError === true };
} finally {
  await Promise.all([mcp.close(), bob.close()]);
}
console.log(JSON.stringify(report));
