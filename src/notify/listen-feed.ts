import { Injectable } from '@nestjs/common';
import { TaskFeed } from './task-feed.js';

/**
 * The feed of this process's listen streams: the TaskNotifier publishes here the changes it
 * hears (ListenNotifier those of this process; a notifier for several processes those of every
 * process), and ListenHandler turns them into `notifications/tasks` for the streams watching
 * that task.
 */
@Injectable()
export class ListenFeed extends TaskFeed {}
