import { Controller, Get, type INestApplication, Module, Post } from '@nestjs/common';
import { DocumentBuilder, SwaggerModule } from '@nestjs/swagger';
import { ExpressAdapter } from '@nestjs/platform-express';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { Test } from '@nestjs/testing';
import { TasksModule } from '../src/index.js';
import { ADAPTERS, type AdapterName } from './support/app.js';

@Controller('jobs')
class JobsController {
  @Get()
  list(): string[] {
    return [];
  }

  @Post(':id/retry')
  retry(): string {
    return 'ok';
  }
}

function appModule(path?: string, withConsole = false) {
  @Module({
    imports: [
      TasksModule.forRoot({
        ...(path !== undefined && { path }),
        ...(withConsole && { console: { guards: [] } }),
      }),
    ],
    controllers: [JobsController],
  })
  class AppModule {}
  return AppModule;
}

async function documentPaths(
  adapter: AdapterName,
  path?: string,
  withConsole = false,
): Promise<string[]> {
  const moduleRef = await Test.createTestingModule({
    imports: [appModule(path, withConsole)],
  }).compile();
  const app: INestApplication = moduleRef.createNestApplication(
    adapter === 'express' ? new ExpressAdapter() : new FastifyAdapter(),
    { logger: false },
  );
  await app.init();
  try {
    const config = new DocumentBuilder().setTitle('app').build();
    return Object.keys(SwaggerModule.createDocument(app, config).paths).sort();
  } finally {
    await app.close();
  }
}

describe.each(ADAPTERS)('Swagger (%s)', (adapter) => {
  it('the document lists the REST paths and no MCP endpoint', async () => {
    expect(await documentPaths(adapter)).toEqual(['/jobs', '/jobs/{id}/retry']);
  });

  it('also under another path', async () => {
    expect(await documentPaths(adapter, 'rpc/mcp')).toEqual(['/jobs', '/jobs/{id}/retry']);
  });

  it('and none of the task console’s routes', async () => {
    expect(await documentPaths(adapter, undefined, true)).toEqual(['/jobs', '/jobs/{id}/retry']);
  });
});
