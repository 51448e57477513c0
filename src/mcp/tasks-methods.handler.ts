import { Inject, Injectable, Logger } from '@nestjs/common';
import { type TaskOwner, toWire, validateInputResponses, validateTaskId } from '../task.js';
import { TASKS_CONFIG } from '../tasks.constants.js';
import type { TasksConfig } from '../interfaces/tasks-module-options.interface.js';
import { TasksService } from '../tasks.service.js';
import {
  completeResult,
  declaresTasks,
  missingTasksCapability,
  type MethodCall,
  resultMeta,
  sendError,
  sendFailure,
  sendResult,
} from './json-rpc.js';

export const TASK_METHODS: ReadonlySet<string> = new Set([
  'tasks/get',
  'tasks/update',
  'tasks/cancel',
]);

/**
 * The lean path for `tasks/get`, `tasks/update` and `tasks/cancel`: polling is this extension's
 * hot path, so these are answered straight from TasksService, with no per-request McpServer.
 * The envelope and standard headers were checked before (see McpEndpoint); here: the capability,
 * the params, the owner.
 */
@Injectable()
export class TasksMethodsHandler {
  private readonly logger = new Logger('TasksMethodsHandler');
  private readonly meta: Record<string, unknown>;

  constructor(
    private readonly tasks: TasksService,
    @Inject(TASKS_CONFIG) config: TasksConfig,
  ) {
    this.meta = resultMeta(config.serverInfo);
  }

  async handle({ res, id, method, params, owner }: MethodCall): Promise<void> {
    if (!declaresTasks(params)) return sendError(res, id, missingTasksCapability(method));
    try {
      sendResult(res, id, await this.answer(method, params as Record<string, unknown>, owner));
    } catch (error) {
      sendFailure(res, id, error, this.logger, method);
    }
  }

  private async answer(
    method: string,
    params: Record<string, unknown>,
    owner: TaskOwner,
  ): Promise<unknown> {
    const taskId = validateTaskId(params.taskId);
    switch (method) {
      case 'tasks/get':
        return completeResult(this.meta, toWire(await this.tasks.get(taskId, owner)));
      case 'tasks/update': {
        const responses = validateInputResponses(params.inputResponses);
        await this.tasks.update(taskId, owner, responses);
        return completeResult(this.meta);
      }
      default:
        await this.tasks.cancel(taskId, owner);
        return completeResult(this.meta);
    }
  }
}
