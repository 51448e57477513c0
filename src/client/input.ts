import type { JsonValue } from '@modelcontextprotocol/ext-tasks/core';
import {
  type ApplicationCreateMessageResult,
  type ApplicationElicitResult,
  type ApplicationInputHandler,
  type ApplicationInputRequest,
  type ApplicationInputResult,
  type ApplicationListRootsResult,
  type ResolvedInputExchangeContext,
  TaskCancelledError,
} from '@modelcontextprotocol/ext-tasks/client';

/** The params of an input request, as the server sent them. */
export type InputParams = Readonly<Record<string, JsonValue>>;

/** Where an input request comes from. */
export interface InputContext {
  /** The task that asks (undefined when a tool asks before it has a task). */
  readonly taskId: string | undefined;
  /** The key of the request in the task's `inputRequests`. */
  readonly inputKey: string | undefined;
  /** Aborted when the answer is no longer wanted (the task ended, the client closed). */
  readonly signal: AbortSignal | undefined;
}

type Answer<T> = T | Promise<T>;

/**
 * Answers the input requests of the tasks this client follows. A kind without a handler is
 * refused: an elicitation is declined (`{ action: "decline" }`), a roots request gets an empty
 * list, and a sampling request (which has no refusal on the wire) cancels the task, so
 * `result()` rejects with an {@link InputRefusedError} instead of waiting forever. A handler that
 * throws is reported to `onError`; the tool then sees a cancelled elicitation, or (sampling,
 * roots) its task is cancelled the same way.
 */
export interface InputHandlers {
  /** `elicitation/create`: params carry `message` and `requestedSchema` (or `url`). */
  elicitation?: (params: InputParams, context: InputContext) => Answer<ApplicationElicitResult>;
  /** `sampling/createMessage`: params carry `messages` and `maxTokens`. */
  sampling?: (params: InputParams, context: InputContext) => Answer<ApplicationCreateMessageResult>;
  /** `roots/list`. */
  roots?: (
    params: InputParams | undefined,
    context: InputContext,
  ) => Answer<ApplicationListRootsResult>;
}

/**
 * A task asked for input this client could not give (no handler for the kind, or the handler
 * threw), and there is no way to refuse that kind on the wire, so the client cancelled the task.
 * It is a `TaskCancelledError`, with the reason in its message.
 */
export class InputRefusedError extends TaskCancelledError {
  constructor(
    readonly kind: 'sampling' | 'roots',
    readonly taskId: string | undefined,
    reason: string,
    options?: ErrorOptions,
  ) {
    super(options);
    this.name = 'InputRefusedError';
    this.message =
      taskId === undefined
        ? `The tool asked for ${kind} input, and ${reason}`
        : `Task ${taskId} asked for ${kind} input, and ${reason}; the task was cancelled`;
  }
}

/** What the input handler needs from the connection around it. */
export interface InputRouting {
  /** Cancels the task whose input could not be given, remembering why. */
  refuse(taskId: string, error: InputRefusedError): void;
  /** Errors thrown by the handlers (the tool sees a cancelled elicitation). */
  report(error: Error): void;
}

const describe = (error: unknown): string =>
  error instanceof Error ? error.message : String(error);

/** Builds the session's input handler from the user's per-kind handlers. */
export function inputHandler(
  handlers: InputHandlers,
  routing: InputRouting,
): ApplicationInputHandler['handle'] {
  const answer = async (
    request: ApplicationInputRequest,
    context: InputContext,
  ): Promise<ApplicationInputResult<ApplicationInputRequest>> => {
    switch (request.kind) {
      case 'elicitation': {
        const handler = handlers.elicitation;
        if (handler === undefined) return { action: 'decline' };
        try {
          return await handler(request.params, context);
        } catch (error) {
          routing.report(error instanceof Error ? error : new Error(describe(error)));
          return { action: 'cancel' };
        }
      }
      case 'roots': {
        const handler = handlers.roots;
        if (handler === undefined) return { roots: [] };
        try {
          return await handler(request.params, context);
        } catch (error) {
          throw refusal('roots', context, `the roots handler failed: ${describe(error)}`, error);
        }
      }
      case 'sampling': {
        const handler = handlers.sampling;
        if (handler === undefined) {
          throw refusal('sampling', context, 'this client has no onInput.sampling handler');
        }
        try {
          return await handler(request.params, context);
        } catch (error) {
          throw refusal(
            'sampling',
            context,
            `the sampling handler failed: ${describe(error)}`,
            error,
          );
        }
      }
    }
  };

  /** The error for an input that cannot be given; for a task, the task is cancelled too. */
  const refusal = (
    kind: 'sampling' | 'roots',
    context: InputContext,
    reason: string,
    cause?: unknown,
  ): InputRefusedError => {
    const error = new InputRefusedError(
      kind,
      context.taskId,
      reason,
      cause === undefined ? undefined : { cause },
    );
    if (context.taskId !== undefined) routing.refuse(context.taskId, error);
    return error;
  };

  return (async (request: ApplicationInputRequest, resolved: ResolvedInputExchangeContext) =>
    answer(request, {
      taskId: resolved.taskId,
      inputKey: resolved.inputId,
      signal: resolved.signal,
    })) as ApplicationInputHandler['handle'];
}
