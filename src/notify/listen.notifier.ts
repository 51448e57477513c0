import { Inject, Injectable } from '@nestjs/common';
import type { TaskRecord } from '../task.js';
import { LISTEN_FEED } from '../tasks.constants.js';
import type { TaskEvents } from './task-events.js';
import type { TaskNotifier } from './task-notifier.js';

/**
 * The default notifier: puts every change on this process's listen feed, where the listen router
 * turns it into `notifications/tasks` for the streams watching that task. It knows nothing of
 * HTTP. (A notifier for several processes publishes the change so that every process puts it on
 * its own feed.)
 */
@Injectable()
export class ListenNotifier implements TaskNotifier {
  constructor(@Inject(LISTEN_FEED) private readonly feed: TaskEvents) {}

  notify(record: TaskRecord): void {
    this.feed.publish(record);
  }
}
