-- nestjs-mcp-tasks PostgreSQL schema, version 4: a create below both limits in one pass.
--
-- Version 3's create_task judges every create the full way: the row and its shard's count in a
-- block with an exception handler (a subtransaction on every create, so that a share found used
-- up after waiting for its shard lets that shard go), the owner's hash computed apart from its
-- count, and checks for the case at the quota. Most creates are below the owner's quota and within
-- their shard's share of maxRows; try_create_task does those in one pass, under the same locks
-- taken in the same order (the owner's advisory lock, the row, then the shard), with no
-- subtransaction:
--
-- - It takes the owner's lock and counts its live tasks as create_task does. At the quota it
--   returns 2 having written nothing: create_task then judges the create in full (making room,
--   or refusing it).
-- - It inserts the row; a taken id returns -1, with nothing written.
-- - It adds the row to its connection's shard within the shard's share. When the share is used up
--   (or was made for another maxRows) it deletes its row again and returns 2: its transaction ends
--   there, letting the shard go (the lock an UPDATE keeps after waiting for it), and the caller
--   calls create_task, which shares the room again under every shard. Answering with a value
--   rather than an error keeps the caller's connection (a pool drops a connection whose query
--   failed).
--
-- So a create is one round trip below both limits, two at the owner's quota or at a used-up share
-- (the first then leaves nothing written). create_task is unchanged: an instance of the previous release
-- still running calls it, and the limits hold across both, which count alike.
--
-- Applied after 003-create-without-hot-row.sql, in place: it adds a function, nothing else.
-- Idempotent.

-- Stores a new task below both limits: returns 1 (stored), -1 (the id is taken) or 2 (at the
-- owner's quota, or its share used up: nothing written, create_task judges it). The arguments are
-- create_task's.
CREATE OR REPLACE FUNCTION mcp_tasks.try_create_task(
  p_task_id text, p_owner_key text, p_status text, p_created_at bigint, p_expires_at bigint,
  p_terminal_at bigint, p_held_by text, p_tool_name text, p_version bigint, p_record json,
  p_now bigint, p_max_rows bigint, p_max_per_owner bigint
) RETURNS integer LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  v_owned bigint;
BEGIN
  IF p_max_per_owner IS NOT NULL THEN
    -- create_task's lock (1836344180: "mcpt"), then a count with a snapshot taken under it.
    PERFORM pg_catalog.pg_advisory_xact_lock(1836344180, pg_catalog.hashtext(p_owner_key));
    SELECT count(*) INTO v_owned FROM mcp_tasks.tasks
      WHERE mcp_tasks.owner_hash(owner_key) = mcp_tasks.owner_hash(p_owner_key)
        AND owner_key = p_owner_key AND (expires_at IS NULL OR expires_at > p_now);
    IF v_owned >= p_max_per_owner THEN
      RETURN 2;
    END IF;
  END IF;
  INSERT INTO mcp_tasks.tasks (task_id, owner_key, status, created_at, expires_at, terminal_at,
      held_by, tool_name, version, record)
    VALUES (p_task_id, p_owner_key, p_status, p_created_at, p_expires_at, p_terminal_at,
      p_held_by, p_tool_name, p_version, p_record)
    ON CONFLICT (task_id) DO NOTHING;
  IF NOT FOUND THEN
    RETURN -1;
  END IF;
  UPDATE mcp_tasks.row_shards SET n = n + 1
    WHERE shard = mcp_tasks.own_shard()
      AND (p_max_rows IS NULL OR (max_rows = p_max_rows AND n + 1 <= cap));
  IF NOT FOUND THEN
    DELETE FROM mcp_tasks.tasks WHERE task_id = p_task_id;
    RETURN 2;
  END IF;
  RETURN 1;
END $$;

INSERT INTO mcp_tasks.schema_version (version, description)
  VALUES (4, 'try_create_task: a create below both limits in one pass, without a subtransaction')
  ON CONFLICT (version) DO NOTHING;
