-- A synthetic version 3 that fails halfway, for test/postgres/postgres.setup.spec.ts: its upgrade
-- must leave nothing behind.
CREATE TABLE IF NOT EXISTS mcp_tasks.half_done (id integer);
SELECT 1 / 0;
INSERT INTO mcp_tasks.schema_version (version, description)
  VALUES (3, 'never recorded') ON CONFLICT (version) DO NOTHING;
