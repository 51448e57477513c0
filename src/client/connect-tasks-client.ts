import type { FetchLike } from '@modelcontextprotocol/client';
import type { TaskId } from '@modelcontextprotocol/ext-tasks/core';
import { TASKS_EXTENSION_ID } from '../tasks.constants.js';
import {
  connectErrorFor,
  type HttpAnswer,
  statusTextOf,
  TasksExtensionMissingError,
} from './errors.js';
import { inputHandler, type InputRefusedError } from './input.js';
import {
  connectionOutage,
  describeError,
  resolveRetry,
  TaskServerUnreachableError,
} from './retry.js';
import { type OpenSession, openTasksSession } from './session.js';
import { TasksClient, type TasksClientOptions } from './tasks-client.js';

/**
 * Connects to the MCP endpoint at `url` (Streamable HTTP, protocol 2026-07-28) and checks that it
 * serves the Tasks extension. Rejects with an Error naming the URL when the server cannot be
 * reached (connecting is tried once: `retry` covers what comes after), with one saying so when it
 * does not advertise `io.modelcontextprotocol/tasks`, and with a RangeError naming the key of a
 * bad `retry` option.
 */
export async function connectTasksClient(
  url: string | URL,
  options: TasksClientOptions = {},
): Promise<TasksClient> {
  const endpoint = new URL(url);
  const retry = resolveRetry(options.retry);
  const refusals = new Map<string, InputRefusedError>();
  let opened: OpenSession | undefined;
  const report = (error: Error): void => {
    try {
      if (options.onError === undefined) console.error(error);
      else options.onError(error);
    } catch (sinkError) {
      console.error(sinkError);
    }
  };
  // The SDK's negotiation errors drop the HTTP status (a 404 reads "the server did not offer
  // pinned protocol version … via server/discover"), so the client notes what the endpoint
  // answered while connecting, and names it when connecting fails.
  const baseFetch: FetchLike = options.fetch ?? ((input, init) => fetch(input, init));
  let connecting = true;
  let last: ConnectEvent | undefined;
  const watchedFetch: FetchLike = async (input, init) => {
    if (!connecting) return baseFetch(input, init);
    const method = new Headers(init?.headers).get('mcp-method') ?? 'connect';
    try {
      const response = await baseFetch(input, init);
      if (!response.ok) {
        last = {
          answer: {
            method: init?.method ?? 'GET',
            status: response.status,
            statusText: statusTextOf(response),
          },
        };
      }
      return response;
    } catch (error) {
      last = { failure: error, method };
      throw error;
    }
  };
  let connectError: unknown;
  try {
    opened = await openTasksSession(endpoint, {
      ...options,
      fetch: watchedFetch,
      retry,
      onInputRequest: inputHandler(options.onInput ?? {}, {
        refuse: (taskId, error) => {
          refusals.set(taskId, error);
          void opened?.session.cancelTask(taskId as TaskId).catch(report);
        },
        report,
      }),
    });
  } catch (error) {
    connectError = error;
  } finally {
    connecting = false;
  }
  if (opened === undefined) throw connectFailure(endpoint.href, last, connectError);
  const advertised = opened.client.getServerCapabilities()?.extensions?.[TASKS_EXTENSION_ID];
  const exact =
    advertised !== null &&
    typeof advertised === 'object' &&
    !Array.isArray(advertised) &&
    Object.keys(advertised).length === 0;
  if (!exact) {
    await opened.close();
    throw new TasksExtensionMissingError(endpoint.href, advertised);
  }
  return new TasksClient(endpoint, opened, options, refusals, retry);
}

/** The last thing the endpoint did while the client connected: an HTTP error status, or no answer. */
type ConnectEvent = { answer: HttpAnswer } | { failure: unknown; method: string };

/**
 * The error for a connection that failed: the HTTP status the endpoint answered (one class per
 * case), a `TaskServerUnreachableError` when nothing answered, else an Error naming the URL.
 */
function connectFailure(url: string, last: ConnectEvent | undefined, error: unknown): Error {
  if (last !== undefined && 'answer' in last) return connectErrorFor(url, last.answer, error);
  const outage = last === undefined ? undefined : connectionOutage(last.failure);
  if (last !== undefined && outage !== undefined) {
    return new TaskServerUnreachableError(
      { url, method: last.method, outage, attempts: 1, waitedMs: 0 },
      { cause: error },
    );
  }
  return new Error(`Could not connect to the MCP server at ${url}: ${describeError(error)}`, {
    cause: error,
  });
}
