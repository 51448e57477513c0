import {
  connectTasksClient,
  type TaskCall,
  TaskCancelledError,
  TaskFailedError,
  type TaskSnapshot,
} from '../src/client/index.js';

/**
 * The demo client (`npm run demo [name]`), on the package's client entry (`nestjs-mcp-tasks/client`)
 * against the demo server (`npm start`). It dials `MCP_URL`, or `http://127.0.0.1:${PORT}/mcp`
 * (PORT 3000 by default, as `npm start`).
 */

const url = process.env.MCP_URL ?? `http://127.0.0.1:${process.env.PORT ?? 3000}/mcp`;
const name = process.argv[2] ?? 'Luca';

const statusText = (task: TaskSnapshot): string =>
  task.statusMessage === undefined ? task.status : `${task.status}: ${task.statusMessage}`;

const textOf = (result: { content?: unknown[] }): string =>
  (result.content ?? [])
    .map((block) => (block as { text?: unknown }).text)
    .filter((text) => typeof text === 'string')
    .join('');

/** Prints each status change of a call: rewritten in place on a terminal, one per line elsewhere. */
function show(label: string, call: TaskCall): () => void {
  const tty = process.stdout.isTTY === true;
  let shown = false;
  const stop = call.onStatus((task) => {
    const line = `  [${label}] ${statusText(task)}`;
    if (tty) process.stdout.write(`\r\x1b[2K${line}`);
    else console.log(line);
    shown = true;
  });
  return () => {
    stop();
    if (tty && shown) process.stdout.write('\n');
  };
}

async function main(): Promise<void> {
  console.log(`Connecting to ${url}`);
  await using mcp = await connectTasksClient(url, {
    headers: { Authorization: 'Bearer demo' },
    onInput: {
      elicitation: (params) => {
        console.log(`  [greet] the server asks: ${String(params.message)}`);
        console.log(`  [greet] answering: ${name}`);
        return { action: 'accept', content: { name } };
      },
    },
    onError: (error) => console.error(`  (client) ${error.message}`),
  });
  console.log(`Connected at ${mcp.protocolVersion}`);
  console.log(`Tools: ${(await mcp.listTools()).map((tool) => tool.name).join(', ')}`);

  console.log('\nadd_slowly {a: 2, b: 3}, followed live over a listen stream');
  const add = await mcp.callTool('add_slowly', { a: 2, b: 3, delayMs: 1000 });
  console.log(`  task ${add.taskId}`);
  let done = show('add_slowly', add);
  const sum = await add.result();
  done();
  console.log(`  result: ${textOf(sum)}`);

  console.log('\ngreet');
  const greet = await mcp.callTool('greet');
  done = show('greet', greet);
  const greeting = await greet.result();
  done();
  console.log(`  result: ${textOf(greeting)}`);

  console.log('\nwait_for_cancel (cancelled after 1 s)');
  const waiting = await mcp.callTool('wait_for_cancel');
  done = show('wait_for_cancel', waiting);
  await new Promise((resolve) => setTimeout(resolve, 1000));
  if (process.stdout.isTTY === true) process.stdout.write('\n');
  console.log('  cancelling');
  await waiting.cancel();
  const cancelled = await waiting.result().catch((error: unknown) => error);
  done();
  if (!(cancelled instanceof TaskCancelledError))
    throw new Error('wait_for_cancel was not cancelled');
  console.log(`  final status on the server: ${(await waiting.snapshot()).status}`);

  console.log('\nfail_with {code: -32042, message: "Nope"}');
  const failing = await mcp.callTool('fail_with', { code: -32042, message: 'Nope' });
  done = show('fail_with', failing);
  const failed = await failing.result().catch((error: unknown) => error);
  done();
  if (!(failed instanceof TaskFailedError)) throw new Error('fail_with did not fail');
  console.log(`  error ${failed.code}: ${failed.message}`);

  console.log('\necho {text: "hi"} (a plain tool: answered at once, no task)');
  const echo = await mcp.callTool('echo', { text: 'hi' });
  console.log(`  task: ${echo.taskId ?? 'none'}; result: ${textOf(await echo.result())}`);
}

main().then(
  () => console.log('\nDone.'),
  (error: unknown) => {
    console.error(`\nDemo failed: ${error instanceof Error ? error.message : String(error)}`);
    process.exitCode = 1;
  },
);
