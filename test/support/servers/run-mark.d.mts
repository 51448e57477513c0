/** The environment variable that marks the processes of one test run. */
export const RUN_MARK: string;

/** Starts a run: its mark, inherited by every process the tests start. */
export function beginRun(): void;

/** Records a server this run started, to be killed at its end if it still runs then. */
export function markProcess(pid: number | undefined): void;

/** The processes of this run still running, this one aside. */
export function leftovers(): { pid: number; command: string }[];

/** Ends a run: kills what is left of it, says what that was, and removes the mark's directory. */
export function endRun(): void;
