import type { McpServer } from '@modelcontextprotocol/server';

export function registerEverything(_server: McpServer): void {}
