import { Injectable } from '@nestjs/common';
import type { TaskRecord } from '../task.js';
import { ListenFeed } from './listen-feed.js';
import type { TaskNotifier } from './task-notifier.js';

/**
 * The default notifier: puts every change on this process's listen feed, where ListenHandler
 * turns it into `notifications/tasks` for the streams watching that task. It knows nothing of
 * HTTP. (A notifier for several processes publishes the change so that every process puts it on
 * its own feed.)
 */
@Injectable()
export class ListenNotifier implements TaskNotifier {
  constructor(private readonly feed: ListenFeed) {}

  notify(record: TaskRecord): void {
    this.feed.publish(record);
  }
}
