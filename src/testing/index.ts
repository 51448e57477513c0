/**
 * `nestjs-mcp-tasks/testing`: the TaskStore contract suite (runner-agnostic: Jest, Vitest,
 * node:test) and `runTaskTool`, which runs a `@TaskTool` method in a unit test without HTTP.
 */
export {
  taskStoreContract,
  taskStoreContractRules,
  type TaskStoreContractCase,
  type TaskStoreHarness,
} from './task-store.contract.js';
export {
  runTaskTool,
  TaskToolInputError,
  type RunTaskFunctionOptions,
  type RunTaskToolOptions,
  type TaskToolAnswers,
  type TaskToolMethodOutcome,
  type TaskToolRun,
  type TaskToolStatus,
} from './run-task-tool.js';
