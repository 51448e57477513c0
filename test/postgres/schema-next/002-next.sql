-- A synthetic version 2, for test/postgres/postgres.setup.spec.ts: what a release's upgrade does in
-- place (an index built over the tasks already there, a function added), recorded as 001 records
-- itself. Idempotent, as every shipped file is.
CREATE INDEX IF NOT EXISTS tasks_tool ON mcp_tasks.tasks (tool_name) WHERE tool_name IS NOT NULL;
CREATE OR REPLACE FUNCTION mcp_tasks.live_tasks(p_now bigint) RETURNS bigint
  LANGUAGE sql STABLE AS $$
  SELECT count(*) FROM mcp_tasks.tasks WHERE expires_at IS NULL OR expires_at > p_now
$$;
INSERT INTO mcp_tasks.schema_version (version, description)
  VALUES (2, 'a synthetic next version: tasks_tool, live_tasks')
  ON CONFLICT (version) DO NOTHING;
