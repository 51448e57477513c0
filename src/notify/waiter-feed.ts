import { Injectable } from '@nestjs/common';
import { TaskFeed } from './task-feed.js';

/**
 * The feed of this process's waiters: TasksService publishes every record it writes here, and
 * the code that waits on a task in this process hears it at once (waitForTask: a tool awaiting
 * input, a running call's cancellation watch, an inline call awaiting its end). A notifier for
 * several processes also publishes here what other processes wrote.
 */
@Injectable()
export class WaiterFeed extends TaskFeed {}
