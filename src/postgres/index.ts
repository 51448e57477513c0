/**
 * `nestjs-mcp-tasks/postgres`: the PostgreSQL store and notifier, for apps whose instances share
 * a database.
 * Needs `pg` (node-postgres 8, an optional peer dependency: `npm install pg`).
 */
export { PostgresTaskStore, type PostgresTaskStoreOptions } from './postgres.task-store.js';
export { POSTGRES_SCHEMA_VERSION, postgresSchemaSql } from './postgres-schema.js';
export type { PostgresConnectionOptions } from './postgres-connection.js';
export { PostgresTaskNotifier, postgresNotifier } from './postgres.notifier.js';
