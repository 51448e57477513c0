-- nestjs-mcp-tasks PostgreSQL schema, version 1.
--
-- PostgresTaskStore applies this file by itself on first use (its `setup` option, on by default),
-- in one transaction, with every name in the schema it is given in place of mcp_tasks. A team
-- that runs its own migrations applies it as it is (or with mcp_tasks replaced by its schema's
-- name) and gives the store `setup: false`. Every statement is idempotent: applying the file
-- twice changes nothing. Later versions ship as 002-….sql and so on, each recorded in
-- mcp_tasks.schema_version.
--
-- Times are epoch milliseconds (bigint), as the records hold them.

CREATE SCHEMA IF NOT EXISTS mcp_tasks;

-- The versions applied: a later release reads the highest and applies what follows it.
CREATE TABLE IF NOT EXISTS mcp_tasks.schema_version (
  version integer PRIMARY KEY,
  description text NOT NULL,
  applied_at timestamptz NOT NULL DEFAULT now()
);

-- One row per task. `record` is the whole record as the application wrote it (json, not jsonb:
-- jsonb refuses the \u0000 a tool result may hold); the other columns are read off it, for the
-- statements to filter and order by without parsing it.
CREATE TABLE IF NOT EXISTS mcp_tasks.tasks (
  -- Task ids are base64url: the C collation orders them bytewise, as every store lists them.
  task_id text COLLATE "C" PRIMARY KEY,
  -- The owner (principal and tenant) as one string (see ownerKey in the package).
  owner_key text COLLATE "C" NOT NULL,
  status text NOT NULL,
  created_at bigint NOT NULL,
  -- createdAt + ttlMs; NULL for a task without a TTL.
  expires_at bigint,
  -- For a finished task without a TTL, the instant it finished (it is kept terminalTtlMs from
  -- then); NULL otherwise.
  terminal_at bigint,
  -- The instance whose lease holds the task (from its create until a write makes it terminal).
  held_by text,
  tool_name text,
  version bigint NOT NULL,
  record json NOT NULL
);

-- An owner's listing (newest first: read backwards) and its count for maxTasksPerOwner.
CREATE INDEX IF NOT EXISTS tasks_owner_created
  ON mcp_tasks.tasks (owner_key, created_at, task_id);
-- The operator's listing across owners.
CREATE INDEX IF NOT EXISTS tasks_created ON mcp_tasks.tasks (created_at, task_id);
-- Cleanup by expiry, and by the instant a task without a TTL finished: O(removed).
CREATE INDEX IF NOT EXISTS tasks_expiry
  ON mcp_tasks.tasks (expires_at) WHERE expires_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS tasks_terminal
  ON mcp_tasks.tasks (terminal_at) WHERE terminal_at IS NOT NULL;
-- An owner's finished tasks by expiry (a task without a TTL last), for making room at its quota.
CREATE INDEX IF NOT EXISTS tasks_owner_finished
  ON mcp_tasks.tasks (owner_key, expires_at, task_id)
  WHERE status IN ('completed', 'failed', 'cancelled');
-- The tasks each instance holds.
CREATE INDEX IF NOT EXISTS tasks_held ON mcp_tasks.tasks (held_by) WHERE held_by IS NOT NULL;

-- The number of rows in tasks (expired ones not yet removed included), for maxRows: one row,
-- locked by every create and removal, so that concurrent creates cannot both take the last row.
-- Each function that adds or removes rows keeps it right (rows added or removed by hand are not
-- counted: run mcp_tasks.recount_tasks() after such an edit).
CREATE TABLE IF NOT EXISTS mcp_tasks.counts (
  name text PRIMARY KEY,
  n bigint NOT NULL
);
INSERT INTO mcp_tasks.counts (name, n) VALUES ('rows', 0) ON CONFLICT (name) DO NOTHING;

-- Instances sharing the store, each with the instant its lease runs out (PostgreSQL's clock).
CREATE TABLE IF NOT EXISTS mcp_tasks.instances (
  instance_id text PRIMARY KEY,
  lease_until bigint NOT NULL
);

-- Stores a new task, in one round trip: returns 1 (stored), 0 (maxRows reached), -1 (the id is
-- taken) or -2 (the owner's quota, every one of its tasks live). Creates are serialized by the
-- lock on the row count, so each statement below (a new snapshot in a VOLATILE function) sees
-- every create before it. At the owner's quota its finished tasks that expire first are deleted,
-- as many as needed; at maxRows the expired tasks are removed, then the count judged again.
CREATE OR REPLACE FUNCTION mcp_tasks.create_task(
  p_task_id text, p_owner_key text, p_status text, p_created_at bigint, p_expires_at bigint,
  p_terminal_at bigint, p_held_by text, p_tool_name text, p_version bigint, p_record json,
  p_now bigint, p_max_rows bigint, p_max_per_owner bigint
) RETURNS integer LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  v_rows bigint;
  v_owned bigint;
  v_gone bigint;
BEGIN
  SELECT n INTO v_rows FROM mcp_tasks.counts WHERE name = 'rows' FOR UPDATE;
  PERFORM 1 FROM mcp_tasks.tasks WHERE task_id = p_task_id;
  IF FOUND THEN RETURN -1; END IF;
  IF p_max_per_owner IS NOT NULL THEN
    SELECT count(*) INTO v_owned FROM mcp_tasks.tasks
      WHERE owner_key = p_owner_key AND (expires_at IS NULL OR expires_at > p_now);
    IF v_owned >= p_max_per_owner THEN
      WITH gone AS (
        DELETE FROM mcp_tasks.tasks WHERE task_id IN (
          SELECT task_id FROM mcp_tasks.tasks
            WHERE owner_key = p_owner_key AND status IN ('completed', 'failed', 'cancelled')
              AND (expires_at IS NULL OR expires_at > p_now)
            ORDER BY expires_at NULLS LAST, task_id
            LIMIT v_owned - p_max_per_owner + 1)
        RETURNING 1)
      SELECT count(*) INTO v_gone FROM gone;
      v_rows := v_rows - v_gone;
      IF v_owned - v_gone >= p_max_per_owner THEN
        UPDATE mcp_tasks.counts SET n = v_rows WHERE name = 'rows';
        RETURN -2;
      END IF;
    END IF;
  END IF;
  IF p_max_rows IS NOT NULL AND v_rows >= p_max_rows THEN
    -- Expired tasks never count: they go first (by the expiry index), then the count is judged.
    WITH gone AS (DELETE FROM mcp_tasks.tasks WHERE expires_at <= p_now RETURNING 1)
    SELECT count(*) INTO v_gone FROM gone;
    v_rows := v_rows - v_gone;
    IF v_rows >= p_max_rows THEN
      UPDATE mcp_tasks.counts SET n = v_rows WHERE name = 'rows';
      RETURN 0;
    END IF;
  END IF;
  INSERT INTO mcp_tasks.tasks (task_id, owner_key, status, created_at, expires_at, terminal_at,
      held_by, tool_name, version, record)
    VALUES (p_task_id, p_owner_key, p_status, p_created_at, p_expires_at, p_terminal_at,
      p_held_by, p_tool_name, p_version, p_record);
  UPDATE mcp_tasks.counts SET n = v_rows + 1 WHERE name = 'rows';
  RETURN 1;
END $$;

-- Deletes a task; returns whether it was there. The row count is locked first, as a create locks
-- it, so that a delete and a create's eviction never wait on each other in opposite order.
CREATE OR REPLACE FUNCTION mcp_tasks.delete_task(p_task_id text)
RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  v_rows bigint;
BEGIN
  SELECT n INTO v_rows FROM mcp_tasks.counts WHERE name = 'rows' FOR UPDATE;
  DELETE FROM mcp_tasks.tasks WHERE task_id = p_task_id;
  IF NOT FOUND THEN RETURN false; END IF;
  UPDATE mcp_tasks.counts SET n = v_rows - 1 WHERE name = 'rows';
  RETURN true;
END $$;

-- Removes at most p_batch tasks past their expiry (p_now) and at most p_batch finished tasks
-- without a TTL that finished at p_terminal_before or earlier, both by their index, and takes
-- them off the row count (the count is locked only when there is something to remove, so an
-- idle janitor never holds up a create). Returns how many tasks it removed (the caller calls
-- again while a batch comes back full).
CREATE OR REPLACE FUNCTION mcp_tasks.cleanup_tasks(
  p_now bigint, p_terminal_before bigint, p_batch integer
) RETURNS bigint LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  v_expired bigint;
  v_finished bigint;
BEGIN
  IF NOT EXISTS (SELECT 1 FROM mcp_tasks.tasks WHERE expires_at <= p_now)
    AND NOT EXISTS (SELECT 1 FROM mcp_tasks.tasks WHERE terminal_at <= p_terminal_before) THEN
    RETURN 0;
  END IF;
  -- Locked before the rows, as a create locks it, so the two never wait on each other in
  -- opposite order.
  PERFORM 1 FROM mcp_tasks.counts WHERE name = 'rows' FOR UPDATE;
  WITH gone AS (
    DELETE FROM mcp_tasks.tasks WHERE task_id IN (
      SELECT task_id FROM mcp_tasks.tasks WHERE expires_at <= p_now LIMIT p_batch)
    RETURNING 1)
  SELECT count(*) INTO v_expired FROM gone;
  WITH gone AS (
    DELETE FROM mcp_tasks.tasks WHERE task_id IN (
      SELECT task_id FROM mcp_tasks.tasks WHERE terminal_at <= p_terminal_before LIMIT p_batch)
    RETURNING 1)
  SELECT count(*) INTO v_finished FROM gone;
  UPDATE mcp_tasks.counts SET n = n - v_expired - v_finished WHERE name = 'rows';
  RETURN v_expired + v_finished;
END $$;

-- Counts the table again, for after rows were added or removed by hand.
CREATE OR REPLACE FUNCTION mcp_tasks.recount_tasks()
RETURNS bigint LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  v_rows bigint;
BEGIN
  PERFORM 1 FROM mcp_tasks.counts WHERE name = 'rows' FOR UPDATE;
  SELECT count(*) INTO v_rows FROM mcp_tasks.tasks;
  UPDATE mcp_tasks.counts SET n = v_rows WHERE name = 'rows';
  RETURN v_rows;
END $$;

INSERT INTO mcp_tasks.schema_version (version, description)
  VALUES (1, 'tasks, counts, instances; create_task, delete_task, cleanup_tasks, recount_tasks')
  ON CONFLICT (version) DO NOTHING;
