import { Injectable } from '@nestjs/common';
import type { ServerNotifier } from '@modelcontextprotocol/server';

/**
 * Announces changes of the app's MCP surface to the clients listening for them
 * (`subscriptions/listen` with `toolsListChanged`, `promptsListChanged`, `resourcesListChanged` or
 * `resourceSubscriptions`): inject it where tools, prompts or resources change at run time, or use
 * the one `configure` receives. A change of tools, prompts or resources also makes the endpoint
 * build its servers again, so `configure` runs anew for the requests after it. The SDK's own notifier of the endpoint's handler, reachable before
 * the endpoint starts (nothing is announced then) and without one (`path: false`: a no-op).
 */
@Injectable()
export class McpServerNotifier implements ServerNotifier {
  private target: ServerNotifier | undefined;
  private onSurfaceChange: (() => void) | undefined;

  /**
   * Called by the endpoint once its handler exists; `onSurfaceChange` runs before a change of the
   * tools, prompts or resources is announced (the endpoint retires the servers it keeps).
   */
  attach(target: ServerNotifier | undefined, onSurfaceChange?: () => void): void {
    this.target = target;
    this.onSurfaceChange = onSurfaceChange;
  }

  toolsChanged(): void {
    this.onSurfaceChange?.();
    this.target?.toolsChanged();
  }

  promptsChanged(): void {
    this.onSurfaceChange?.();
    this.target?.promptsChanged();
  }

  resourcesChanged(): void {
    this.onSurfaceChange?.();
    this.target?.resourcesChanged();
  }

  resourceUpdated(uri: string): void {
    this.target?.resourceUpdated(uri);
  }
}
