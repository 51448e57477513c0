import { PassThrough } from 'node:stream';
import { BodyBudget } from '../../src/mcp/body-budget.js';
import { readJson } from '../../src/mcp/body-reader.js';
import { OVERSIZED_BODY, RefusedBody } from '../../src/mcp/body-refusals.js';
import { BODY_CHUNK_OVERHEAD_BYTES } from '../../src/tasks.constants.js';

/**
 * The accounting of request bodies while they arrive (issue 34): what BodyBudget counts, and that
 * readJson gives every byte back however a read ends (its end, broken JSON, the client's close,
 * an error, an oversized body, a refusal, its timeout), so that the budget is back to zero.
 */

const OVERHEAD = BODY_CHUNK_OVERHEAD_BYTES;
const bytes = (count: number, fill = ' '): Buffer => Buffer.alloc(count, fill);

/** A body of `length` bytes of valid JSON (a string). */
const jsonOf = (length: number): Buffer => Buffer.from(`"${'x'.repeat(length - 2)}"`);

/** Resolves after the stream's queued events have run. */
const settle = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe('BodyBudget', () => {
  it('counts in all and per address, refuses past either cap naming it, and gives back on release', () => {
    const budget = new BodyBudget({ maxBytesInFlight: 1_000, maxBytesInFlightPerAddress: 600 });
    const a = budget.open(() => 'a');
    const b = budget.open(() => 'b');
    expect(a.charge(500)).toBeUndefined();
    expect(b.charge(400)).toBeUndefined();
    expect([budget.bytesInFlight, budget.heldBy('a'), budget.heldBy('b')]).toEqual([900, 500, 400]);

    // Past its address's share: the address's cap is named, whatever is left in all.
    expect(a.charge(101)).toEqual({
      code: -32000,
      message:
        'Server busy: the request bodies from your address fill their budget ' +
        '(bodies.maxBytesInFlightPerAddress 600); retry later',
      data: { limit: 'bodies.maxBytesInFlightPerAddress', max: 600, retryAfterMs: 1_000 },
    });
    // Past the process's budget.
    const c = budget.open(() => 'c');
    expect(c.charge(101)).toEqual({
      code: -32000,
      message:
        'Server busy: the request bodies being read fill their budget ' +
        '(bodies.maxBytesInFlight 1000); retry later',
      data: { limit: 'bodies.maxBytesInFlight', max: 1_000, retryAfterMs: 1_000 },
    });
    // A refused charge took nothing.
    expect([budget.bytesInFlight, a.held, c.held]).toEqual([900, 500, 0]);
    expect(c.charge(100)).toBeUndefined();

    a.release();
    a.release();
    expect([budget.bytesInFlight, budget.heldBy('a'), a.held]).toEqual([500, 0, 0]);
    b.release();
    c.release();
    expect([budget.bytesInFlight, budget.addresses]).toEqual([0, 0]);
  });

  it('shares an address between its bodies, and without a per-address cap only the total counts', () => {
    const budget = new BodyBudget({ maxBytesInFlight: 1_000, maxBytesInFlightPerAddress: 600 });
    const first = budget.open(() => 'a');
    const second = budget.open(() => 'a');
    expect(first.charge(400)).toBeUndefined();
    expect(second.charge(201)?.data.limit).toBe('bodies.maxBytesInFlightPerAddress');
    first.release();
    expect(second.charge(600)).toBeUndefined();

    const open = new BodyBudget({ maxBytesInFlight: 1_000, maxBytesInFlightPerAddress: null });
    expect(open.open(() => 'a').charge(1_000)).toBeUndefined();
    expect(open.open(() => 'a').charge(1)?.data.limit).toBe('bodies.maxBytesInFlight');
  });

  it('asks for the address only when a body is charged', () => {
    const budget = new BodyBudget({ maxBytesInFlight: 1_000, maxBytesInFlightPerAddress: 600 });
    let asked = 0;
    const account = budget.open(() => {
      asked++;
      return 'a';
    });
    account.release();
    expect(asked).toBe(0);
    account.charge(1);
    account.charge(1);
    expect(asked).toBe(1);
  });
});

describe('readJson with a budget', () => {
  const MAX_BODY = 10_000;
  let budget: BodyBudget;
  beforeEach(() => {
    budget = new BodyBudget({ maxBytesInFlight: 30_000, maxBytesInFlightPerAddress: 20_000 });
  });

  /** Reads from a fresh stream as a client of `address`, with a Content-Length or chunked. */
  function read(
    declared: number | undefined,
    { address = 'a', timeoutMs }: { address?: string; timeoutMs?: number } = {},
  ): { payload: PassThrough; result: Promise<unknown> } {
    const payload = new PassThrough();
    const result = readJson(payload, {
      maxBytes: MAX_BODY,
      ...(declared !== undefined && { declaredLength: String(declared) }),
      account: budget.open(() => address),
      ...(timeoutMs !== undefined && { timeoutMs }),
    });
    return { payload, result };
  }

  it('charges nothing for a body that arrives whole, however full the budget', async () => {
    const hog = budget.open(() => 'a');
    expect(hog.charge(20_000)).toBeUndefined();
    const body = jsonOf(5_000);
    const { payload, result } = read(body.length);
    payload.end(body);
    await expect(result).resolves.toBe(JSON.parse(body.toString()));
    expect(budget.bytesInFlight).toBe(20_000);
    hog.release();
  });

  it('reserves a declared body at its first chunk, charges each further chunk its Buffer, and gives all back at the end', async () => {
    const body = jsonOf(9_000);
    const { payload, result } = read(body.length);
    payload.write(body.subarray(0, 3_000));
    await settle();
    expect(budget.bytesInFlight).toBe(9_000);
    payload.write(body.subarray(3_000, 6_000));
    await settle();
    expect(budget.bytesInFlight).toBe(9_000 + OVERHEAD);
    payload.end(body.subarray(6_000));
    await expect(result).resolves.toBe(JSON.parse(body.toString()));
    expect(budget.bytesInFlight).toBe(0);
  });

  it('charges a chunked body (no Content-Length) chunk by chunk, the last one too', async () => {
    const body = jsonOf(4_000);
    const { payload, result } = read(undefined);
    payload.write(body.subarray(0, 1_000));
    await settle();
    expect(budget.bytesInFlight).toBe(1_000 + OVERHEAD);
    payload.write(body.subarray(1_000));
    await settle();
    expect(budget.bytesInFlight).toBe(4_000 + 2 * OVERHEAD);
    payload.end();
    await expect(result).resolves.toBe(JSON.parse(body.toString()));
    expect(budget.bytesInFlight).toBe(0);
  });

  it('gives back what a body held when the client goes away mid-body', async () => {
    const { payload, result } = read(8_000);
    payload.write(bytes(2_000));
    await settle();
    expect(budget.bytesInFlight).toBe(8_000);
    payload.destroy();
    await expect(result).rejects.toThrow('The request closed before its body ended');
    expect(budget.bytesInFlight).toBe(0);
  });

  it('gives back what a body held when its stream fails', async () => {
    const { payload, result } = read(undefined);
    payload.write(bytes(2_000));
    await settle();
    expect(budget.bytesInFlight).toBe(2_000 + OVERHEAD);
    payload.destroy(new Error('socket hang up'));
    await expect(result).rejects.toThrow('socket hang up');
    expect(budget.bytesInFlight).toBe(0);
  });

  it('gives back what a body held when it turns out to be broken JSON', async () => {
    const { payload, result } = read(undefined);
    payload.write('{"jsonrpc":');
    await settle();
    expect(budget.bytesInFlight).toBeGreaterThan(0);
    payload.end('}');
    await expect(result).rejects.toThrow(SyntaxError);
    expect(budget.bytesInFlight).toBe(0);
  });

  it('gives back what an oversized body held as soon as it goes over, and keeps nothing of the rest', async () => {
    const { payload, result } = read(undefined);
    payload.write(bytes(MAX_BODY - 100));
    await settle();
    expect(budget.bytesInFlight).toBe(MAX_BODY - 100 + OVERHEAD);
    payload.write(bytes(200));
    await settle();
    expect(budget.bytesInFlight).toBe(0);
    payload.write(bytes(5_000));
    await settle();
    expect(budget.bytesInFlight).toBe(0);
    payload.end();
    await expect(result).resolves.toBe(OVERSIZED_BODY);
  });

  it('charges nothing for a body declared over maxBodyBytes: it is dropped from its first byte', async () => {
    const { payload, result } = read(MAX_BODY + 1);
    payload.write(bytes(6_000));
    await settle();
    expect(budget.bytesInFlight).toBe(0);
    payload.end(bytes(MAX_BODY + 1 - 6_000));
    await expect(result).resolves.toBe(OVERSIZED_BODY);
  });

  it('refuses a body its address has no room for with 503, keeping nothing, while another address fits', async () => {
    const first = read(MAX_BODY);
    first.payload.write(bytes(100));
    const second = read(MAX_BODY);
    second.payload.write(bytes(100));
    await settle();
    expect(budget.heldBy('a')).toBe(2 * MAX_BODY);
    // A third body from 'a' would pass 20,000 for that address.
    const third = read(MAX_BODY);
    third.payload.write(bytes(100));
    const refused = (await third.result) as RefusedBody;
    expect(refused).toBeInstanceOf(RefusedBody);
    expect(refused.status).toBe(503);
    expect(refused.retryAfterMs).toBe(1_000);
    expect(refused.error.data).toEqual({
      limit: 'bodies.maxBytesInFlightPerAddress',
      max: 20_000,
      retryAfterMs: 1_000,
    });
    expect(budget.heldBy('a')).toBe(2 * MAX_BODY);
    // Another address still has room in the total.
    const other = read(MAX_BODY, { address: 'b' });
    other.payload.write(bytes(100));
    await settle();
    expect(budget.bytesInFlight).toBe(3 * MAX_BODY);
    // And one more anywhere is over the total (30,000).
    const fourth = read(MAX_BODY, { address: 'c' });
    fourth.payload.write(bytes(100));
    expect(((await fourth.result) as RefusedBody).error.data).toMatchObject({
      limit: 'bodies.maxBytesInFlight',
      max: 30_000,
    });
    for (const { payload, result } of [first, second, other]) {
      payload.destroy();
      await expect(result).rejects.toThrow('The request closed before its body ended');
    }
    expect(budget.bytesInFlight).toBe(0);
    expect(budget.addresses).toBe(0);
  });

  it('refuses a body that does not arrive within its time with 408, and gives back what it held', async () => {
    const { payload, result } = read(5_000, { timeoutMs: 40 });
    payload.write(bytes(1_000));
    await settle();
    expect(budget.bytesInFlight).toBe(5_000);
    const refused = (await result) as RefusedBody;
    expect(refused).toBeInstanceOf(RefusedBody);
    expect(refused.status).toBe(408);
    expect(refused.error).toEqual({
      code: -32000,
      message: 'Request body not received in time (bodies.timeoutMs 40)',
      data: { limit: 'bodies.timeoutMs', max: 40 },
    });
    expect(budget.bytesInFlight).toBe(0);
    // What comes after is not read into anything.
    expect(payload.listenerCount('data')).toBe(0);
  });

  it('answers 413 to an oversized body still being dropped when its time is up', async () => {
    const { payload, result } = read(MAX_BODY + 1, { timeoutMs: 40 });
    payload.write(bytes(1_000));
    const refused = (await result) as RefusedBody;
    expect([refused.status, refused.error.code]).toEqual([413, -32600]);
  });

  it('clears its timer when the body ends in time', async () => {
    const body = jsonOf(100);
    const { payload, result } = read(body.length, { timeoutMs: 40 });
    payload.end(body);
    await expect(result).resolves.toBe(JSON.parse(body.toString()));
    await new Promise((resolve) => setTimeout(resolve, 60));
    expect(budget.bytesInFlight).toBe(0);
  });
});
