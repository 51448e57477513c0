// The client side, as a user writes it: ESM, on nestjs-mcp-tasks/client.
// Usage: node dist/client.mjs <endpoint URL>; prints what happened as one JSON line.
import { connectTasksClient, TaskCancelledError } from 'nestjs-mcp-tasks/client';

const url = process.argv[2];
if (url === undefined) throw new Error('usage: client.mjs <url>');

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
try {
  report.tools = (await mcp.listTools()).map((tool) => tool.name).sort();

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
  await mcp.close();
}
console.log(JSON.stringify(report));
