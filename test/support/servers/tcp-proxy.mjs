// A TCP proxy on loopback, for the fault tests: one address for an app, whose target the test
// moves (a failover's new primary) and whose connections it cuts (as the failover does).
import { connect, createServer } from 'node:net';
import { freePort } from './free-port.mjs';

/**
 * Listens on a free loopback port (or `port`) and forwards each connection to
 * `targetHost:targetPort`, byte for byte both ways. `retarget(port, host?)` sends the connections
 * made from then on elsewhere (the open ones stay where they are); `dropAll()` destroys every open
 * connection on both sides (`{ reset: true }`: with a TCP RST, as a peer that crashed or a
 * connection tracker that forgot it would, instead of a FIN). A connection whose target refuses is
 * accepted and then closed at once: the client sees its connection end, not a refusal.
 */
export async function startTcpProxy({ targetPort, targetHost = '127.0.0.1', port } = {}) {
  if (!Number.isInteger(targetPort)) throw new Error('startTcpProxy needs a targetPort');
  let target = { host: targetHost, port: targetPort };
  /** Both sockets of each open connection. */
  const open = new Set();
  let accepted = 0;

  const server = createServer({ allowHalfOpen: false }, (client) => {
    accepted++;
    const upstream = connect(target.port, target.host);
    const pair = { client, upstream };
    open.add(pair);
    const close = () => {
      open.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', close);
    upstream.on('error', close);
    client.on('close', close);
    upstream.on('close', close);
    client.pipe(upstream);
    upstream.pipe(client);
  });
  const listenPort = port ?? (await freePort());
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(listenPort, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });

  const dropAll = ({ reset = false } = {}) => {
    for (const pair of [...open]) {
      open.delete(pair);
      for (const socket of [pair.client, pair.upstream]) {
        // A socket still connecting has no handle to reset: destroy it.
        if (reset && !socket.connecting && !socket.destroyed) socket.resetAndDestroy();
        else socket.destroy();
      }
    }
  };

  return {
    host: '127.0.0.1',
    port: listenPort,
    get target() {
      return { ...target };
    },
    /** Connections open now. */
    get connections() {
      return open.size;
    },
    /** Connections accepted since the start. */
    get accepted() {
      return accepted;
    },
    retarget: (newPort, host = target.host) => {
      target = { host, port: newPort };
    },
    dropAll,
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve());
        dropAll();
      }),
  };
}
