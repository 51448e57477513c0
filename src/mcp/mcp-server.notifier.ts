import { Injectable } from '@nestjs/common';
import type { ServerNotifier } from '@modelcontextprotocol/server';

/**
 * Announces changes of the app's MCP surface to the clients listening for them
 * (`subscriptions/listen` with `toolsListChanged`, `promptsListChanged`, `resourcesListChanged` or
 * `resourceSubscriptions`): inject it where tools, prompts or resources change at run time, or use
 * the one `configure` receives. The SDK's own notifier of the endpoint's handler, reachable before
 * the endpoint starts (nothing is announced then) and without one (`path: false`: a no-op).
 */
@Injectable()
export class McpServerNotifier implements ServerNotifier {
  private target: ServerNotifier | undefined;

  /** Called by the endpoint once its handler exists. */
  attach(target: ServerNotifier | undefined): void {
    this.target = target;
  }

  toolsChanged(): void {
    this.target?.toolsChanged();
  }

  promptsChanged(): void {
    this.target?.promptsChanged();
  }

  resourcesChanged(): void {
    this.target?.resourcesChanged();
  }

  resourceUpdated(uri: string): void {
    this.target?.resourceUpdated(uri);
  }
}
