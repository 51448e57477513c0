// What a test run leaves running, found and killed at its end (Jest's globalSetup and
// globalTeardown: jest-global-setup.mjs, jest-global-teardown.mjs). A test file that fails
// between starting a server and stopping it, or a worker that Jest kills, leaves its children
// behind: a redis-server, a fixture node process whose pipes keep Jest from exiting, a PostgreSQL
// postmaster.
//
// The run's mark is an environment variable naming a directory: every process a test starts
// inherits it, and is found by it in /proc/<pid>/environ. Servers that write their process
// title over their environment (redis-server, postgres) cannot be found so: the code that starts
// them records their process id in that directory (`markProcess`). Linux only (/proc): elsewhere
// nothing is recorded or killed.
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** The environment variable that marks the processes of one test run. */
export const RUN_MARK = 'NESTJS_MCP_TASKS_TEST_RUN';

/**
 * When the process started (clock ticks after boot), to tell it from a later one of its pid;
 * undefined when it is gone or has exited (a zombie its parent has not reaped yet).
 */
function startTime(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
    // Fields after the command (in parentheses, which may hold spaces): state, …, starttime.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return fields[0] === 'Z' ? undefined : fields[19];
  } catch {
    return undefined;
  }
}

/** Starts a run: its mark, inherited by every process the tests start. */
export function beginRun() {
  process.env[RUN_MARK] = mkdtempSync(join(tmpdir(), 'nestjs-mcp-tasks-run-'));
}

/** Records a server this run started, to be killed at its end if it still runs then. */
export function markProcess(pid) {
  const dir = process.env[RUN_MARK];
  const started = pid === undefined ? undefined : startTime(pid);
  if (!dir || started === undefined) return;
  try {
    writeFileSync(join(dir, String(pid)), started);
  } catch {
    // the run is over (its directory removed): nothing to record for
  }
}

/** The processes of this run still running, this one aside. */
export function leftovers() {
  const dir = process.env[RUN_MARK];
  if (!dir) return [];
  const wanted = `${RUN_MARK}=${dir}`;
  const found = new Map();
  let pids;
  try {
    pids = readdirSync('/proc').map(Number).filter(Number.isInteger);
  } catch {
    return [];
  }
  for (const pid of pids) {
    if (pid === process.pid) continue;
    try {
      // Another user's process (PostgreSQL's, as root) is readable by root only; gone is fine.
      const environ = readFileSync(`/proc/${pid}/environ`, 'latin1');
      if (environ.split('\0').includes(wanted) && startTime(pid) !== undefined) {
        found.set(pid, readFileSync(`/proc/${pid}/cmdline`, 'latin1'));
      }
    } catch {
      continue;
    }
  }
  let recorded = [];
  try {
    recorded = readdirSync(dir);
  } catch {
    // no server recorded
  }
  for (const name of recorded) {
    const pid = Number(name);
    try {
      if (startTime(pid) !== readFileSync(join(dir, name), 'utf8')) continue; // gone, or another
      found.set(pid, readFileSync(`/proc/${pid}/cmdline`, 'latin1'));
    } catch {
      continue;
    }
  }
  return [...found].map(([pid, cmdline]) => ({
    pid,
    command: cmdline.split('\0').join(' ').trim(),
  }));
}

/** Ends a run: kills what is left of it, says what that was, and removes the mark's directory. */
export function endRun() {
  const dir = process.env[RUN_MARK];
  if (!dir) return;
  const left = leftovers();
  for (const { pid } of left) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // exited meanwhile
    }
  }
  rmSync(dir, { recursive: true, force: true });
  if (left.length > 0) {
    const list = left.map(({ pid, command }) => `${pid} ${command.slice(0, 80)}`).join('\n  ');
    console.warn(`Killed ${left.length} process(es) the tests left running:\n  ${list}`);
  }
}
