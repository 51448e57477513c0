/**
 * W3C trace context (`traceparent`, `tracestate`) as a tool call carries it: in `params._meta`,
 * in the HTTP headers, or in a queued call's trace fields, read into and out of an OpenTelemetry
 * Context. The API comes in as a parameter (see tasks.telemetry.ts: it is loaded lazily). No
 * public declaration imports this file, so no public declaration names OpenTelemetry's types.
 */
import type * as Otel from '@opentelemetry/api';
import type { TraceCarrier, TraceFields } from './trace-carrier.js';

const W3C_TRACEPARENT = /^([\da-f]{2})-([\da-f]{32})-([\da-f]{16})-([\da-f]{2})(?:-|$)/;

/** Whether `carrier` names a W3C trace, in `params._meta` or in the headers. */
export function namesTrace(carrier: TraceCarrier | undefined): carrier is TraceCarrier {
  const meta = carrier?.meta as Record<string, unknown> | null | undefined;
  if (meta !== null && typeof meta === 'object' && typeof meta.traceparent === 'string') {
    return true;
  }
  return typeof carrier?.headers?.traceparent === 'string';
}

/**
 * The parent of a call's spans: the active context when it has a span (an app with
 * OpenTelemetry's HTTP instrumentation), else the trace `carrier` names in `params._meta`, else
 * in its headers, else the active context.
 */
export function parentContext(api: typeof Otel, carrier: TraceCarrier | undefined): Otel.Context {
  const active = api.context.active();
  if (api.trace.getSpanContext(active) !== undefined || carrier === undefined) return active;
  const meta = carrier.meta as Record<string, unknown> | null | undefined;
  if (meta !== null && typeof meta === 'object') {
    const fromMeta = contextFromFields(api, meta);
    if (fromMeta !== undefined) return fromMeta;
  }
  const headers = carrier.headers;
  if (headers === undefined) return active;
  // The app's propagator first (it may speak B3 or another format), then plain W3C.
  const extracted = api.propagation.extract(active, headers, api.defaultTextMapGetter);
  if (api.trace.getSpanContext(extracted) !== undefined) return extracted;
  return contextFromFields(api, headers) ?? active;
}

/** A context whose remote parent is the W3C `traceparent` / `tracestate` of `fields`. */
export function contextFromFields(api: typeof Otel, fields: unknown): Otel.Context | undefined {
  if (fields === null || typeof fields !== 'object') return undefined;
  const { traceparent, tracestate } = fields as Record<string, unknown>;
  if (typeof traceparent !== 'string') return undefined;
  const match = W3C_TRACEPARENT.exec(traceparent.trim().toLowerCase());
  if (match === null || match[1] === 'ff') return undefined;
  const spanContext: Otel.SpanContext = {
    traceId: match[2]!,
    spanId: match[3]!,
    traceFlags: Number.parseInt(match[4]!, 16) & 1,
    isRemote: true,
  };
  if (!api.isSpanContextValid(spanContext)) return undefined;
  if (typeof tracestate === 'string' && tracestate.length > 0) {
    spanContext.traceState = api.createTraceState(tracestate);
  }
  return api.trace.setSpanContext(api.ROOT_CONTEXT, spanContext);
}

/** The W3C fields of `parent`'s span, for a queued call to carry; none without a valid one. */
export function fieldsOfContext(api: typeof Otel, parent: Otel.Context): TraceFields | undefined {
  const span = api.trace.getSpanContext(parent);
  if (span === undefined || !api.isSpanContextValid(span)) return undefined;
  const flags = (span.traceFlags & 0xff).toString(16).padStart(2, '0');
  const traceparent = `00-${span.traceId}-${span.spanId}-${flags}`;
  const tracestate = span.traceState?.serialize();
  return tracestate ? { traceparent, tracestate } : { traceparent };
}
