import type { PartProvider } from './interfaces/tasks-module-options.interface.js';
import { ListenFeed } from './notify/listen-feed.js';
import type { TaskNotifier } from './notify/task-notifier.js';
import { WaiterFeed } from './notify/waiter-feed.js';
import { TaskStore } from './store/task-store.js';

/**
 * A notifier for several instances as a `notifier` part of TasksModule: `make` is called once per
 * module with the module's listen feed, its waiters and its store (which reads the records sent
 * by reference).
 */
export function notifierProvider(
  make: (listenFeed: ListenFeed, waiters: WaiterFeed, store: TaskStore) => TaskNotifier,
): PartProvider<TaskNotifier> {
  return {
    useFactory: make,
    inject: [ListenFeed, WaiterFeed, TaskStore],
  } as PartProvider<TaskNotifier>;
}
