import type { IncomingMessage } from 'node:http';
import { type ExecutionContext, HttpException } from '@nestjs/common';
import type { TasksConfig } from '../../src/interfaces/tasks-module-options.interface.js';
import type { BodyParsingInstaller } from '../../src/mcp/body-parsing.installer.js';
import { hostRefusal, McpHostGuard } from '../../src/mcp/mcp-host.guard.js';

/** What a request shows the guard: its target, its connection's local address, its headers. */
function request(localAddress: string, host: string | undefined, origin?: string) {
  return {
    url: '/mcp',
    socket: { localAddress },
    headers: {
      ...(host !== undefined && { host }),
      ...(origin !== undefined && { origin }),
    },
  } as unknown as IncomingMessage;
}

const contextOf = (req: IncomingMessage) =>
  ({ switchToHttp: () => ({ getRequest: () => req }) }) as unknown as ExecutionContext;

/** The guard's answer: passes, or the HTTP status and message it refuses with. */
function verdictOf(guard: McpHostGuard, req: IncomingMessage): string {
  try {
    guard.canActivate(contextOf(req));
    return 'pass';
  } catch (error) {
    const http = error as HttpException;
    const body = http.getResponse() as { error: { message: string } };
    return `${http.getStatus()} ${body.error.message}`;
  }
}

/** What hostRefusal, which keeps nothing, answers for the same request. */
function expectedOf(config: Partial<TasksConfig>, req: IncomingMessage): string {
  const refused = hostRefusal(req, req.headers.host, config as TasksConfig);
  return refused === undefined ? 'pass' : `${refused.status} ${refused.message}`;
}

const bodyParsing = { isEndpointPath: () => true } as unknown as BodyParsingInstaller;

describe('McpHostGuard verdicts', () => {
  const configs: Partial<TasksConfig>[] = [
    {},
    { allowedHosts: ['api.example.com'], allowedOrigins: ['app.example.com'] },
    { allowedHosts: false, allowedOrigins: false },
  ];
  const requests = [
    request('127.0.0.1', '127.0.0.1:3000'),
    request('127.0.0.1', 'localhost:3000', 'http://localhost:5173'),
    request('127.0.0.1', 'localhost:3000', 'http://evil.example'),
    request('127.0.0.1', 'evil.example'),
    request('127.0.0.1', undefined),
    request('127.0.0.1', ''),
    request('10.0.0.5', undefined),
    request('10.0.0.5', ''),
    request('10.0.0.5', 'a b'),
    request('10.0.0.5', 'api.example.com', ''),
    request('10.0.0.5', 'api.example.com', 'https://app.example.com'),
    request('10.0.0.5', 'api.example.com', 'https://evil.example'),
    request('::1', '[::1]:3000', 'not a url'),
  ];

  it('answers every request as the checks do, however often and in whatever order it sees it', () => {
    for (const config of configs) {
      const guard = new McpHostGuard(config as TasksConfig, bodyParsing);
      for (let pass = 0; pass < 3; pass++) {
        const order = pass === 1 ? [...requests].reverse() : requests;
        for (const req of order) expect(verdictOf(guard, req)).toBe(expectedOf(config, req));
      }
    }
  });

  it('still answers right once it has seen more hosts than it keeps', () => {
    const config: Partial<TasksConfig> = { allowedHosts: ['api.example.com'] };
    const guard = new McpHostGuard(config as TasksConfig, bodyParsing);
    for (let i = 0; i < 1_000; i++) {
      const req = request('10.0.0.5', i % 7 === 0 ? 'api.example.com' : `h${i}.example`);
      expect(verdictOf(guard, req)).toBe(expectedOf(config, req));
    }
    expect(verdictOf(guard, request('10.0.0.5', 'api.example.com'))).toBe('pass');
    expect(verdictOf(guard, request('10.0.0.5', 'h1.example'))).toBe(
      '403 Invalid Host: h1.example',
    );
  });
});
