import type { INestApplication, Type } from '@nestjs/common';
import { ExpressAdapter } from '@nestjs/platform-express';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { Test } from '@nestjs/testing';

export type AdapterName = 'express' | 'fastify';
export const ADAPTERS: AdapterName[] = ['express', 'fastify'];

export interface RunningApp {
  app: INestApplication;
  /** The endpoint URL on loopback, e.g. http://127.0.0.1:40123/mcp */
  url: string;
  close(): Promise<void>;
}

/**
 * Boots `module` on a real HTTP server on loopback (a free port) with the given adapter;
 * `configure` runs before it listens (`app.enableCors()`, `app.setGlobalPrefix()`…).
 */
export async function startApp(
  module: Type<unknown>,
  adapter: AdapterName,
  path = '/mcp',
  configure?: (app: INestApplication) => void,
): Promise<RunningApp> {
  const moduleRef = await Test.createTestingModule({ imports: [module] }).compile();
  const app = moduleRef.createNestApplication(
    adapter === 'express' ? new ExpressAdapter() : new FastifyAdapter(),
    { forceCloseConnections: true, logger: false },
  );
  configure?.(app);
  await app.listen(0, '127.0.0.1');
  const address = app.getHttpServer().address() as { port: number };
  return {
    app,
    url: `http://127.0.0.1:${address.port}${path}`,
    close: () => app.close(),
  };
}
