// The HTTP load generator of bench/http and bench/peers: targets (a server and the exact bytes of
// one request), keep-alive load with a fixed number of requests in flight, and comparisons in
// rounds that rotate the contenders' order. Plain ESM JavaScript, no dependency beyond Node.

import { Buffer } from 'node:buffer';
import { Agent, request } from 'node:http';
import { performance } from 'node:perf_hooks';
import { fmt, median } from './common.mjs';

const pad = (s, n) => String(s).padStart(n);

/**
 * A load generator: `concurrency` requests in flight, `rounds` rounds of `roundMs` after a
 * `warmupMs` warm-up per contender. A target's `server` answers `cpu()` with its process's CPU
 * time in µs (user + system).
 */
export function loadGenerator({ concurrency, rounds, roundMs, warmupMs, requestTimeoutMs }) {
  /** Every target made, so their agents can be closed at the end. */
  const targets = [];

  /** One load target: a server, and the exact bytes of the request sent to it again and again. */
  function target(label, server, { path, headers, body }) {
    const payload = Buffer.from(body);
    const t = {
      label,
      server,
      agent: new Agent({ keepAlive: true, maxSockets: concurrency }),
      options: {
        host: '127.0.0.1',
        port: server.port,
        path,
        method: 'POST',
        headers: { ...headers, 'content-length': String(payload.length) },
      },
      payload,
    };
    targets.push(t);
    return t;
  }

  /** Sends the target's request once; resolves the HTTP status (and the body when asked). */
  function send(t, keepBody = false) {
    return new Promise((resolve, reject) => {
      const req = request({ ...t.options, agent: t.agent, timeout: requestTimeoutMs }, (res) => {
        if (!keepBody) {
          res.on('end', () => resolve({ status: res.statusCode }));
          res.resume();
          return;
        }
        const chunks = [];
        res.on('data', (chunk) => chunks.push(chunk));
        res.on('end', () =>
          resolve({ status: res.statusCode, text: Buffer.concat(chunks).toString('utf8') }),
        );
      });
      req.on('timeout', () =>
        req.destroy(new Error(`${t.label}: no answer in ${requestTimeoutMs} ms`)),
      );
      req.on('error', reject);
      req.end(t.payload);
    });
  }

  /**
   * Keeps `concurrency` requests in flight for `ms`. Returns requests/s, the client's CPU share
   * and the server's CPU time per request. A non-200 answer is counted as an error, not as served.
   */
  async function load(t, ms) {
    const serverBefore = await t.server.cpu();
    const clientBefore = process.cpuUsage();
    let served = 0;
    let errors = 0;
    const start = performance.now();
    const deadline = start + ms;
    const worker = async () => {
      while (performance.now() < deadline) {
        const { status } = await send(t);
        if (status === 200) served++;
        else errors++;
      }
    };
    await Promise.all(Array.from({ length: concurrency }, worker));
    const seconds = (performance.now() - start) / 1000;
    const client = process.cpuUsage(clientBefore);
    const serverCpu = (await t.server.cpu()) - serverBefore;
    return {
      rps: served / seconds,
      errors,
      clientCpu: (client.user + client.system) / 1e6 / seconds,
      serverUsPerRequest: serverCpu / Math.max(1, served + errors),
    };
  }

  /** Sends the target's request once and checks the answer with `check` (throws when wrong). */
  async function verify(t, check) {
    const { status, text } = await send(t, true);
    let json;
    try {
      json = JSON.parse(text);
    } catch {
      json = undefined;
    }
    if (status !== 200 || !check(json)) {
      throw new Error(`${t.label} answered HTTP ${status}: ${String(text).slice(0, 300)}`);
    }
    return text;
  }

  /**
   * Warm-up, then the rounds of every contender, the order rotated every round (with two, the
   * subject goes first in odd rounds and the baseline in even ones). `contenders` is a list of
   * `{ target, check }`, and `pairs` a list of `[numerator, denominator]` indexes into it: each
   * pair gets a ratio per round. Prints the rounds; returns each contender's medians (`labels`,
   * `rps`, `us`: server µs per request, `errors`) and, in `pairs`, each pair's `label`, the median
   * `ratio` of its per-round ratios and those `rounds`. The caller prints the medians its way.
   */
  async function compareAll(title, contenders, pairs) {
    console.log(`\n${title}`);
    for (const { target: t, check } of contenders) {
      await verify(t, check);
      await load(t, warmupMs);
    }
    const width = Math.max(...contenders.map((c) => c.target.label.length));
    const cell = (r) =>
      `${pad(fmt(r.rps), 7)} req/s ${pad(fmt(r.serverUsPerRequest), 5)} µs/req server` +
      ` (client CPU ${fmt(r.clientCpu * 100)} %${r.errors ? `, ${r.errors} errors` : ''})`;
    const pairLabel = ([i, j]) => `${contenders[i].target.label} ÷ ${contenders[j].target.label}`;
    const rows = [];
    for (let round = 1; round <= rounds; round++) {
      const shift = (round - 1) % contenders.length;
      const order = [...contenders.slice(shift), ...contenders.slice(0, shift)];
      const byTarget = new Map();
      for (const { target: t } of order) byTarget.set(t, await load(t, roundMs));
      const row = {
        results: contenders.map((c) => byTarget.get(c.target)),
        ratios: pairs.map(
          ([i, j]) =>
            byTarget.get(contenders[i].target).rps / byTarget.get(contenders[j].target).rps,
        ),
      };
      rows.push(row);
      contenders.forEach((c, i) => {
        const head = i === 0 ? `  round ${round}  ` : '           ';
        console.log(`${head}${c.target.label.padEnd(width)}: ${cell(row.results[i])}`);
      });
      const ratios = pairs.map((pair, k) =>
        pairs.length > 1 ? `${pairLabel(pair)} ${fmt(row.ratios[k], 3)}` : fmt(row.ratios[k], 3),
      );
      console.log(`           ratio${pairs.length > 1 ? 's' : ''} ${ratios.join(', ')}`);
    }
    for (const { target: t, check } of contenders) await verify(t, check);
    return {
      width,
      labels: contenders.map((c) => c.target.label),
      rps: contenders.map((_, i) => median(rows.map((r) => r.results[i].rps))),
      us: contenders.map((_, i) => median(rows.map((r) => r.results[i].serverUsPerRequest))),
      errors: contenders.map((_, i) => rows.reduce((n, r) => n + r.results[i].errors, 0)),
      pairs: pairs.map((pair, k) => ({
        pair,
        label: pairLabel(pair),
        ratio: median(rows.map((r) => r.ratios[k])),
        rounds: rows.map((r) => r.ratios[k]),
      })),
    };
  }

  return { targets, target, send, load, verify, compareAll };
}
