/**
 * Issue 35, friction 2: the package client against a URL where no MCP endpoint answers. Each
 * failure to connect names the HTTP status (when there is one), the URL, and for a 404 the likely
 * cause (no `TasksModule` imported, or the wrong path), each as its own exported error class.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Controller, Get, Module } from '@nestjs/common';
import { createMcpHandler, McpServer } from '@modelcontextprotocol/server';
import { toNodeHandler } from '@modelcontextprotocol/node';
import * as z from 'zod/v4';
import {
  connectTasksClient,
  McpConnectError,
  McpEndpointNotFoundError,
  McpForbiddenError,
  McpHttpStatusError,
  McpUnauthorizedError,
  TaskServerUnreachableError,
  TasksExtensionMissingError,
} from '../../src/client/index.js';
import { type RunningApp, startApp } from '../support/app.js';
import { rejection } from '../support/helpers.js';

/** The real case: an app that forgot `TasksModule`. Nest answers 404 on /mcp. */
@Controller()
class HealthController {
  @Get('health')
  health() {
    return 'ok';
  }
}

@Module({ controllers: [HealthController] })
class AppWithoutTasksModule {}

/** Answers every request with the status in its path (`/401/mcp` → 401), as a gateway would. */
function statusServer(): Server {
  return createServer((request, response) => {
    const status = Number(/^\/(\d{3})\//.exec(request.url ?? '')?.[1] ?? 404);
    request.resume();
    request.on('end', () => {
      response.writeHead(status, { 'content-type': 'text/plain' });
      response.end(`status ${status}`);
    });
  });
}

const listen = async (server: Server): Promise<string> => {
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
};

const closeServer = (server: Server): Promise<void> =>
  new Promise((done) => server.close(() => done()));

/** `retry: false`: a refused connection is reported at once. */
const connect = (url: string) => connectTasksClient(url, { retry: false });

describe('connectTasksClient: errors that say where (issue 35)', () => {
  let nest: RunningApp;
  let plain: Server;
  let origin: string;

  beforeAll(async () => {
    nest = await startApp(AppWithoutTasksModule, 'express');
    plain = statusServer();
    origin = await listen(plain);
  });

  afterAll(async () => {
    await nest?.close();
    if (plain !== undefined) await closeServer(plain);
  });

  it('a Nest app without TasksModule (404): status, URL and the TasksModule hint', async () => {
    const error = (await rejection(connect(nest.url))) as McpEndpointNotFoundError;
    expect(error).toBeInstanceOf(McpEndpointNotFoundError);
    expect(error).toBeInstanceOf(McpConnectError);
    expect(error.name).toBe('McpEndpointNotFoundError');
    expect(error.status).toBe(404);
    expect(error.url).toBe(nest.url);
    expect(error.message).toContain(`POST ${nest.url} answered 404 Not Found`);
    expect(error.message).toContain('no MCP endpoint there');
    expect(error.message).toContain('TasksModule');
    expect(error.message).toContain('/mcp');
    expect(error.message).not.toContain('Version negotiation');
  });

  it('a plain server answering 404 on another path: the same error', async () => {
    const url = `${origin}/404/api/mcp`;
    const error = (await rejection(connect(url))) as McpEndpointNotFoundError;
    expect(error).toBeInstanceOf(McpEndpointNotFoundError);
    expect(error.status).toBe(404);
    expect(error.url).toBe(url);
    expect(error.message).toContain(`POST ${url} answered 404 Not Found`);
  });

  it.each([
    [401, 'Unauthorized', McpUnauthorizedError, 'credentials'],
    [403, 'Forbidden', McpForbiddenError, 'refused'],
    [500, 'Internal Server Error', McpHttpStatusError, 'server'],
    [502, 'Bad Gateway', McpHttpStatusError, 'server'],
  ] as const)('HTTP %i: status and URL, its own class', async (status, text, type, hint) => {
    const url = `${origin}/${status}/mcp`;
    const error = (await rejection(connect(url))) as McpConnectError;
    expect(error).toBeInstanceOf(type);
    expect(error).toBeInstanceOf(McpConnectError);
    expect(error.status).toBe(status);
    expect(error.url).toBe(url);
    expect(error.message).toContain(`POST ${url} answered ${status} ${text}`);
    expect(error.message).toContain(hint);
  });

  it('an answer that is no MCP (200, plain text): an Error naming the URL', async () => {
    const url = `${origin}/200/mcp`;
    const error = (await rejection(connect(url))) as Error;
    expect(error).not.toBeInstanceOf(McpConnectError);
    expect(error.message).toMatch(
      new RegExp(`^Could not connect to the MCP server at ${url.replace(/[.?]/g, '\\$&')}: `),
    );
  });

  it('a refused port: TaskServerUnreachableError naming the URL and ECONNREFUSED', async () => {
    const server = createServer();
    const url = `${await listen(server)}/mcp`;
    await closeServer(server);
    const error = (await rejection(connect(url))) as TaskServerUnreachableError;
    expect(error).toBeInstanceOf(TaskServerUnreachableError);
    expect(error.url).toBe(url);
    expect(error.errorCode).toBe('ECONNREFUSED');
    expect(error.status).toBeUndefined();
    expect(error.message).toContain(url);
    expect(error.message).toContain('ECONNREFUSED');
  });

  it('an MCP server without the tasks extension: TasksExtensionMissingError naming the URL', async () => {
    const handler = createMcpHandler(() => {
      const server = new McpServer({ name: 'plain', version: '1.0.0' });
      server.registerTool('echo', { inputSchema: z.object({ text: z.string() }) }, ({ text }) => ({
        content: [{ type: 'text', text }],
      }));
      return server;
    });
    const node = toNodeHandler(handler);
    const server = createServer((req, res) => void node(req, res));
    const url = `${await listen(server)}/mcp`;
    try {
      const error = (await rejection(connect(url))) as TasksExtensionMissingError;
      expect(error).toBeInstanceOf(TasksExtensionMissingError);
      expect(error).toBeInstanceOf(McpConnectError);
      expect(error.url).toBe(url);
      expect(error.status).toBeUndefined();
      expect(error.message).toContain(
        `The MCP server at ${url} does not advertise the tasks extension (io.modelcontextprotocol/tasks)`,
      );
      expect(error.message).toContain('TasksModule');
    } finally {
      await closeServer(server);
      await handler.close?.();
    }
  });
});
