// The store contract from a consumer's point of view: plain node:test, the packed package.
// Run inside an app that installed nestjs-mcp-tasks: node --test contract.node-test.mjs
import { describe, it } from 'node:test';
import { InMemoryTaskStore } from 'nestjs-mcp-tasks/store';
import { taskStoreContract } from 'nestjs-mcp-tasks/testing';

describe('TaskStore contract: InMemoryTaskStore', () => {
  for (const rule of taskStoreContract(() => new InMemoryTaskStore())) it(rule.name, rule.run);
});
