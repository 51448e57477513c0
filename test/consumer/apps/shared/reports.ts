import { Controller, Get, Injectable, Param, Post, Req, UseGuards } from '@nestjs/common';
import { TasksService } from 'nestjs-mcp-tasks';
import { BearerGuard } from './auth.js';

interface AuthedRequest {
  user: { sub: string };
}

/** A feature module's service: it drives tasks through the injected TasksService. */
@Injectable()
export class ReportsService {
  constructor(private readonly tasks: TasksService) {}

  /** Starts a report as a task of `owner`; a worker finishes it a moment later. */
  async start(owner: string): Promise<string> {
    const task = await this.tasks.create({ principal: owner }, { statusMessage: 'Queued' });
    setTimeout(() => {
      void this.tasks
        .complete(task.taskId, { content: [{ type: 'text', text: 'Report ready' }] })
        .catch(() => undefined);
    }, 50);
    return task.taskId;
  }

  /** The task as its owner sees it; TaskNotFoundError for anyone else. */
  async status(taskId: string, owner: string) {
    const task = await this.tasks.get(taskId, { principal: owner });
    return { taskId: task.taskId, status: task.status, statusMessage: task.statusMessage ?? null };
  }
}

@Controller('reports')
@UseGuards(BearerGuard)
export class ReportsController {
  constructor(private readonly reports: ReportsService) {}

  @Post()
  async start(@Req() request: AuthedRequest) {
    return { taskId: await this.reports.start(request.user.sub) };
  }

  @Get(':taskId')
  status(@Param('taskId') taskId: string, @Req() request: AuthedRequest) {
    return this.reports.status(taskId, request.user.sub);
  }
}
