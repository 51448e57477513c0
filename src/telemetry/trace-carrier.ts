/*
 * The trace context a tool call carries, as the rest of the package names it: these types name
 * none of OpenTelemetry's (an optional peer), so public declarations may use them.
 */
import type { IncomingHttpHeaders } from 'node:http';

/**
 * Where a tool call's trace comes from: the request's `params._meta` (W3C `traceparent` and
 * `tracestate` keys, as the 2026-07-28 revision names them) and its HTTP headers.
 */
export interface TraceCarrier {
  readonly meta?: unknown;
  readonly headers?: IncomingHttpHeaders;
}

/** The W3C trace context a queued call carries to its worker (see `QueuedCall.trace`). */
export type TraceFields = Readonly<{ traceparent: string; tracestate?: string }>;
