import { connect, type Socket } from 'node:net';

/**
 * A client that sends a request body slowly, on a raw socket of its own: the head, a first part
 * of the body, then nothing more (or more on demand), to see what the server answers and when it
 * closes the connection.
 */

/** What a slow client got: its answer (if any), and when its socket closed. */
export interface SlowOutcome {
  status: number | undefined;
  /** Lower-case names. */
  headers: Record<string, string>;
  body: string;
  /** From the connection to the first byte of the answer (undefined: none came). */
  answeredAfterMs: number | undefined;
  /** From the connection to its close. */
  closedAfterMs: number;
  /** The socket's error, if it had one (a server's close may reset it). */
  failure: string | undefined;
}

export interface SlowBody {
  /** Resolves when the socket closes, whoever closed it. */
  readonly done: Promise<SlowOutcome>;
  /** Sends more of the body (nothing once the socket is gone). */
  write(bytes: Buffer | string): void;
  /** Closes the connection from the client's side. */
  abort(): void;
}

export interface SlowBodyOptions {
  /** Request headers, Host included. */
  headers: Record<string, string>;
  /** What is sent of the body at once. */
  first: Buffer | string;
  /** The target. Default `/mcp`. */
  target?: string;
  /** The local address to connect from (any of 127.0.0.0/8 on Linux), to be another client. */
  localAddress?: string;
}

/** An HTTP/1.1 answer read off a raw socket. */
function parseAnswer(raw: Buffer): Pick<SlowOutcome, 'status' | 'headers' | 'body'> {
  const split = raw.indexOf('\r\n\r\n');
  if (split === -1) return { status: undefined, headers: {}, body: raw.toString('utf8') };
  const [statusLine = '', ...lines] = raw.subarray(0, split).toString('latin1').split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(statusLine)?.[1]);
  return { status, headers, body: raw.subarray(split + 4).toString('utf8') };
}

/** Opens a connection to 127.0.0.1:`port` and sends the head and the first part of a body. */
export function slowBody(port: number, options: SlowBodyOptions): SlowBody {
  const head =
    `POST ${options.target ?? '/mcp'} HTTP/1.1\r\n` +
    Object.entries(options.headers)
      .map(([name, value]) => `${name}: ${value}\r\n`)
      .join('') +
    '\r\n';
  const started = Date.now();
  const received: Buffer[] = [];
  let failure: string | undefined;
  let answeredAfterMs: number | undefined;
  const socket: Socket = connect({
    host: '127.0.0.1',
    port,
    ...(options.localAddress !== undefined && { localAddress: options.localAddress }),
  });
  socket.on('error', (error: NodeJS.ErrnoException) => (failure ??= error.code));
  socket.on('data', (chunk: Buffer) => {
    answeredAfterMs ??= Date.now() - started;
    received.push(chunk);
  });
  socket.on('connect', () => {
    socket.write(head);
    socket.write(options.first);
  });
  const done = new Promise<SlowOutcome>((resolve) =>
    socket.on('close', () =>
      resolve({
        ...parseAnswer(Buffer.concat(received)),
        answeredAfterMs,
        closedAfterMs: Date.now() - started,
        failure,
      }),
    ),
  );
  return {
    done,
    write: (bytes) => {
      if (!socket.destroyed) socket.write(bytes);
    },
    abort: () => socket.destroy(),
  };
}
