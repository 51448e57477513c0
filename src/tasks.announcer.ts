import type { Logger } from '@nestjs/common';
import { messageOf } from './errors.js';
import type { TaskChangeListeners } from './notify/task-change.listeners.js';
import type { TaskNotifier } from './notify/task-notifier.js';
import { BoundedMap } from './store/bounded-map.js';
import { deliveryMark, isNews, type TaskRecord } from './task.js';
import { MAX_UNSENT_CHANGE_BYTES, STORE_FAULT_LOG_MS } from './tasks.constants.js';

/** Changes kept for the notifier to send again while it fails (the latest per task); bytes: MAX_UNSENT_CHANGE_BYTES. */
const MAX_UNANNOUNCED = 10_000;
/** What a kept record is counted for beyond what `maxTaskBytes` counts (ids, owner, times). */
const KEPT_RECORD_BYTES = 512;
/** The first wait before a change the notifier failed to send is sent again, and the longest. */
const REANNOUNCE_FIRST_MS = 250;
const REANNOUNCE_MAX_MS = 5_000;
const SENT = (): true => true;

/** What a record kept in memory is counted for: what `maxTaskBytes` counts, plus KEPT_RECORD_BYTES. */
export const heldBytes = (record: TaskRecord): number => (record.bytes ?? 0) + KEPT_RECORD_BYTES;

/**
 * Tells the rest of the app about each write of TasksService: the app's `@OnTaskChange` methods,
 * and the notifier (other processes' listeners). A change the notifier fails to send (its
 * connection is away: a restart, a failover) is kept, the latest per task, and sent again with
 * backoff until the notifier takes it: listeners on other instances hear a task's end even when it
 * was written the moment the store came back, before the notifier's own connection did.
 */
export class TaskAnnouncer {
  /** Changes the notifier failed to send, the latest per task, to send again (see `publish`). */
  private readonly unannounced = new BoundedMap<TaskRecord>(
    MAX_UNANNOUNCED,
    MAX_UNSENT_CHANGE_BYTES,
  );
  private reannouncing: ReturnType<typeof setTimeout> | undefined;
  /**
   * The wait before the next resend: doubled at each resend, back to the first once a resend is
   * taken. (A send fails asynchronously, after its resend round has ended, so the round itself
   * cannot tell whether it should back off.)
   */
  private reannounceDelay = REANNOUNCE_FIRST_MS;
  private notifierFaultLoggedAt = 0;

  constructor(
    private readonly notifier: TaskNotifier | null,
    private readonly listeners: TaskChangeListeners | undefined,
    /** TasksService's own logger: the lines read as they always did. */
    private readonly logger: Logger,
  ) {}

  /** Stops sending again what the notifier failed to send: it is closing too. */
  close(): void {
    clearTimeout(this.reannouncing);
    this.reannouncing = undefined;
    this.unannounced.clear();
  }

  /** A write this process made (or confirmed): the app's listeners, then the notifier. */
  announce(record: TaskRecord): void {
    if (this.listeners?.size) this.listeners.hear(record);
    this.publish(record);
  }

  /** Hands a change to the notifier; one it fails to send is kept to send again. */
  private publish(record: TaskRecord): boolean | Promise<boolean> {
    const notifier = this.notifier;
    if (!notifier) return true;
    const unsent = this.unannounced.get(record.taskId);
    if (unsent !== undefined && !isNews(record, deliveryMark(unsent))) return true;
    this.unannounced.delete(record.taskId);
    try {
      const pending = notifier.notify(record);
      if (pending !== undefined && typeof pending.then === 'function') {
        return pending.then(SENT, (error: unknown) => this.notifierFailed(record, error));
      }
      return true;
    } catch (error) {
      return this.notifierFailed(record, error);
    }
  }

  /** Keeps a change the notifier failed to send, to send again; false (it was not sent). */
  private notifierFailed(record: TaskRecord, error: unknown): false {
    const now = Date.now();
    if (now - this.notifierFaultLoggedAt >= STORE_FAULT_LOG_MS) {
      this.notifierFaultLoggedAt = now;
      this.logger.error(
        `Task notifier failed: ${messageOf(error)} (changes it could not send are sent again; further failures are logged once a minute)`,
      );
    }
    const unsent = this.unannounced.get(record.taskId);
    if (unsent !== undefined && !isNews(record, deliveryMark(unsent))) return false;
    // Past the bounds the oldest change goes: its listeners read the task again when they
    // reconnect.
    this.unannounced.set(record.taskId, record, heldBytes(record));
    if (this.reannouncing === undefined) this.reannounce();
    return false;
  }

  /** Sends the changes the notifier failed to send again, after `reannounceDelay`, backing off. */
  private reannounce(): void {
    const delay = this.reannounceDelay;
    this.reannounceDelay = Math.min(delay * 2, REANNOUNCE_MAX_MS);
    this.reannouncing = setTimeout(() => {
      this.reannouncing = undefined;
      for (const record of this.unannounced.drain()) this.resend(record);
    }, delay);
    this.reannouncing.unref();
  }

  /** One resend: once the notifier takes one, the next outage starts from the first wait. */
  private resend(record: TaskRecord): void {
    const sent = this.publish(record);
    if (sent === true) this.reannounceDelay = REANNOUNCE_FIRST_MS;
    else if (sent !== false) {
      void sent.then((taken) => {
        if (taken) this.reannounceDelay = REANNOUNCE_FIRST_MS;
      });
    }
  }
}
