-- nestjs-mcp-tasks PostgreSQL schema, version 2: owners of any length.
--
-- Version 1 indexed the owner key itself, and a B-tree entry holds at most 2,704 bytes: the
-- create of a task whose owner key did not fit (a principal of a few thousand characters that
-- does not compress) failed. Version 2 indexes a hash of the key instead (owner_hash: the first
-- 16 bytes of its SHA-256); every statement finds an owner's tasks by the hash and keeps those
-- whose key is equal, so two owners whose hashes meet still never see each other's tasks.
--
-- Applied after 001-initial.sql, in place (PostgresTaskStore's setup does it on first use, in
-- one transaction): it builds the two new indexes over every task (writes wait meanwhile, reads
-- do not), drops the two it replaces, and replaces create_task (same arguments). An instance of
-- the previous release still running meanwhile keeps working: its statements compare the key
-- itself, without an index to list an owner's tasks by. Every statement is idempotent.

-- The owner key's hash, as every index and statement computes it: SHA-256 of the key's bytes
-- (backslashes doubled for decode(…, 'escape'), which then gives them back one for one).
-- IMMUTABLE and plain SQL, so that PostgreSQL indexes it and inlines it alike.
CREATE OR REPLACE FUNCTION mcp_tasks.owner_hash(text) RETURNS bytea
  LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT pg_catalog.substr(pg_catalog.sha256(pg_catalog.decode(
    pg_catalog.replace($1, E'\\', E'\\\\'), 'escape')), 1, 16)
$$;

-- An owner's listing (newest first: read backwards) and its count for maxTasksPerOwner.
CREATE INDEX IF NOT EXISTS tasks_owner_hash_created
  ON mcp_tasks.tasks (mcp_tasks.owner_hash(owner_key), created_at, task_id);
-- An owner's finished tasks by expiry (a task without a TTL last), for making room at its quota.
CREATE INDEX IF NOT EXISTS tasks_owner_hash_finished
  ON mcp_tasks.tasks (mcp_tasks.owner_hash(owner_key), expires_at, task_id)
  WHERE status IN ('completed', 'failed', 'cancelled');
DROP INDEX IF EXISTS mcp_tasks.tasks_owner_created;
DROP INDEX IF EXISTS mcp_tasks.tasks_owner_finished;

-- As in version 1 (see 001-initial.sql), the owner's tasks found by its hash.
CREATE OR REPLACE FUNCTION mcp_tasks.create_task(
  p_task_id text, p_owner_key text, p_status text, p_created_at bigint, p_expires_at bigint,
  p_terminal_at bigint, p_held_by text, p_tool_name text, p_version bigint, p_record json,
  p_now bigint, p_max_rows bigint, p_max_per_owner bigint
) RETURNS integer LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  v_rows bigint;
  v_owned bigint;
  v_gone bigint;
  v_owner bytea := mcp_tasks.owner_hash(p_owner_key);
BEGIN
  SELECT n INTO v_rows FROM mcp_tasks.counts WHERE name = 'rows' FOR UPDATE;
  PERFORM 1 FROM mcp_tasks.tasks WHERE task_id = p_task_id;
  IF FOUND THEN RETURN -1; END IF;
  IF p_max_per_owner IS NOT NULL THEN
    SELECT count(*) INTO v_owned FROM mcp_tasks.tasks
      WHERE mcp_tasks.owner_hash(owner_key) = v_owner AND owner_key = p_owner_key
        AND (expires_at IS NULL OR expires_at > p_now);
    IF v_owned >= p_max_per_owner THEN
      WITH gone AS (
        DELETE FROM mcp_tasks.tasks WHERE task_id IN (
          SELECT task_id FROM mcp_tasks.tasks
            WHERE mcp_tasks.owner_hash(owner_key) = v_owner AND owner_key = p_owner_key
              AND status IN ('completed', 'failed', 'cancelled')
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

INSERT INTO mcp_tasks.schema_version (version, description)
  VALUES (2, 'owners indexed by owner_hash(owner_key); create_task finds an owner''s tasks by it')
  ON CONFLICT (version) DO NOTHING;
