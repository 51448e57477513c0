-- nestjs-mcp-tasks PostgreSQL schema, version 1.
--
-- PostgresTaskStore applies this file by itself on first use (its `setup` option, on by default),
-- in one transaction, with every name in the schema it is given in place of mcp_tasks. A team
-- that runs its own migrations applies it as it is (or with mcp_tasks replaced by its schema's
-- name) and gives the store `setup: false`. Every statement is idempotent: applying the file
-- twice changes nothing. Later versions ship as 002-….sql and so on, each applied in place after
-- this one and recorded in mcp_tasks.schema_version.
--
-- Times are epoch milliseconds (bigint), as the records hold them.
--
-- No lock every create shares:
--
-- - The owner's quota is counted in owner_rows, one row per owner (by the hash of its key): a
--   create below the quota by that count stores the task in one statement, the row's lock
--   queueing the owner's creates (creates of two owners do not queue). The count is never below
--   the owner's rows (expired ones count until they are removed): a create at it is judged in
--   full (create_task), which counts the owner's live tasks and then sets the count exactly.
-- - The row count (for maxRows) is spread over row_shards, 64 rows whose counts add up to the
--   rows of tasks. A create adds its row to one shard (its connection's) within that shard's
--   share of maxRows (cap): the shares add up to maxRows, so creates on different shards never
--   wait on each other and together never pass it. When a shard's share is used up (or maxRows
--   is not the one the shares were made for), the create locks every shard, in order, judges the
--   total exactly and shares what room is left again. Removals take their rows off any one shard
--   (a count may go below 0: only the sum means anything).
--
-- Locks are taken in one order everywhere: a task's row (a removal), then owner_rows (a create's
-- own owner; several in the order of their hashes), then row_shards (a create's own shard, or
-- every shard in order). A create judged in full deletes tasks with SKIP LOCKED, never waiting
-- for a task's row while it holds an owner's.

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
-- The operator's listing across owners.
CREATE INDEX IF NOT EXISTS tasks_created ON mcp_tasks.tasks (created_at, task_id);
-- Cleanup by expiry, and by the instant a task without a TTL finished: O(removed).
CREATE INDEX IF NOT EXISTS tasks_expiry
  ON mcp_tasks.tasks (expires_at) WHERE expires_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS tasks_terminal
  ON mcp_tasks.tasks (terminal_at) WHERE terminal_at IS NOT NULL;
-- The tasks each instance holds.
CREATE INDEX IF NOT EXISTS tasks_held ON mcp_tasks.tasks (held_by) WHERE held_by IS NOT NULL;

-- Instances sharing the store, each with the instant its lease runs out (PostgreSQL's clock).
CREATE TABLE IF NOT EXISTS mcp_tasks.instances (
  instance_id text PRIMARY KEY,
  lease_until bigint NOT NULL
);

-- The leases that ran out, which every renewal lists: parked tasks (a durable call's long sleep,
-- its wait for input) hold leases of their own here, one per task, so the table may hold many
-- more rows than instances.
CREATE INDEX IF NOT EXISTS instances_lease_until ON mcp_tasks.instances (lease_until);

-- The row count, in 64 shards: n rows counted here; cap the share of max_rows this shard may
-- fill (NULL when max_rows is NULL: none). The caps of the shards add up to max_rows.
CREATE TABLE IF NOT EXISTS mcp_tasks.row_shards (
  shard integer PRIMARY KEY,
  n bigint NOT NULL,
  cap bigint,
  max_rows bigint
) WITH (fillfactor = 50);
INSERT INTO mcp_tasks.row_shards (shard, n)
  SELECT shard, 0 FROM generate_series(0, 63) AS shard
  ON CONFLICT (shard) DO NOTHING;

-- Each owner's rows, for its quota: n is never below the rows in tasks whose owner key has this
-- hash (a count above it only sends the owner's next create to create_task, which counts
-- again). Owners whose hashes meet share one count.
CREATE TABLE IF NOT EXISTS mcp_tasks.owner_rows (
  owner_hash bytea PRIMARY KEY,
  n bigint NOT NULL
) WITH (fillfactor = 50);

-- The shard a call counts its rows on: its connection's, so that calls on different connections
-- (a pool's, several instances') seldom share one; any shard will do, only the sum means anything.
CREATE OR REPLACE FUNCTION mcp_tasks.own_shard() RETURNS integer
  LANGUAGE sql STABLE PARALLEL RESTRICTED AS $$
  SELECT pg_catalog.pg_backend_pid() & 63
$$;

-- Locks every shard, in order, and shares the room left under p_max_rows among them (the shard
-- p_shard first, for the create that asked): returns the rows counted. The caps then add up to
-- p_max_rows, each at least its shard's count. With p_max_rows NULL, or the rows already past it,
-- there are no caps: every create judges the total until rows are below it again.
CREATE OR REPLACE FUNCTION mcp_tasks.share_rows(p_max_rows bigint, p_shard integer)
RETURNS bigint LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  v_rows bigint;
  v_room bigint;
BEGIN
  PERFORM 1 FROM mcp_tasks.row_shards ORDER BY shard FOR UPDATE;
  SELECT sum(n) INTO v_rows FROM mcp_tasks.row_shards;
  v_room := p_max_rows - v_rows;
  -- Shard s gets room / 64, and one more for the first (room mod 64) shards from p_shard on.
  WITH shares AS (
    SELECT shard, CASE WHEN v_room IS NULL OR v_room < 0 THEN NULL
      ELSE n + v_room / 64 + CASE WHEN (shard - p_shard + 64) % 64 < v_room % 64 THEN 1 ELSE 0 END
      END AS cap
    FROM mcp_tasks.row_shards)
  UPDATE mcp_tasks.row_shards r SET cap = shares.cap, max_rows = p_max_rows
    FROM shares
    WHERE r.shard = shares.shard
      AND (r.cap, r.max_rows) IS DISTINCT FROM (shares.cap, p_max_rows);
  RETURN v_rows;
END $$;

-- Judges a create in full, under the owner's row of owner_rows (create_task locks it): returns 1
-- (stored), 0 (maxRows reached), -1 (the id is taken) or -2 (the owner's quota, every one of its
-- tasks live). Each statement (a new snapshot in a VOLATILE function) sees every create of the
-- owner before it. At the owner's quota its finished tasks that expire first are deleted, as many
-- as needed; at maxRows the expired tasks are removed, then the count judged again. The row is
-- inserted before the shards are locked (a refused one is deleted again): they are locked last.
CREATE OR REPLACE FUNCTION mcp_tasks.judge_create(
  p_task_id text, p_owner_key text, p_status text, p_created_at bigint, p_expires_at bigint,
  p_terminal_at bigint, p_held_by text, p_tool_name text, p_version bigint, p_record json,
  p_now bigint, p_max_rows bigint, p_max_per_owner bigint
) RETURNS integer LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  v_owner bytea;
  v_shard integer := mcp_tasks.own_shard();
  v_owned bigint;
  v_gone bigint := 0;
  v_expired bigint;
  v_rows bigint;
BEGIN
  IF p_max_per_owner IS NOT NULL THEN
    v_owner := mcp_tasks.owner_hash(p_owner_key);
    SELECT count(*) INTO v_owned FROM mcp_tasks.tasks
      WHERE mcp_tasks.owner_hash(owner_key) = v_owner AND owner_key = p_owner_key
        AND (expires_at IS NULL OR expires_at > p_now);
    -- At the quota with no finished task to make room: refused without a write.
    IF v_owned >= p_max_per_owner
      AND NOT EXISTS (SELECT 1 FROM mcp_tasks.tasks
        WHERE mcp_tasks.owner_hash(owner_key) = v_owner AND owner_key = p_owner_key
          AND status IN ('completed', 'failed', 'cancelled')
          AND (expires_at IS NULL OR expires_at > p_now))
      AND NOT EXISTS (SELECT 1 FROM mcp_tasks.tasks WHERE task_id = p_task_id) THEN
      RETURN -2;
    END IF;
  END IF;
  IF v_owned >= p_max_per_owner THEN
    -- Rows another call holds (being deleted or written) are passed over, never waited for.
    WITH gone AS (
      DELETE FROM mcp_tasks.tasks WHERE task_id IN (
        SELECT task_id FROM mcp_tasks.tasks
          WHERE mcp_tasks.owner_hash(owner_key) = v_owner AND owner_key = p_owner_key
            AND status IN ('completed', 'failed', 'cancelled')
            AND (expires_at IS NULL OR expires_at > p_now) AND task_id <> p_task_id
          ORDER BY expires_at NULLS LAST, task_id
          LIMIT v_owned - p_max_per_owner + 1
          FOR UPDATE SKIP LOCKED)
      RETURNING 1)
    SELECT count(*) INTO v_gone FROM gone;
    IF v_owned - v_gone >= p_max_per_owner THEN
      IF v_gone > 0 THEN
        UPDATE mcp_tasks.row_shards SET n = n - v_gone WHERE shard = v_shard;
      END IF;
      RETURN CASE WHEN EXISTS (SELECT 1 FROM mcp_tasks.tasks WHERE task_id = p_task_id)
        THEN -1 ELSE -2 END;
    END IF;
  END IF;
  -- The row, and one more in this shard's share: one shard locked, no other create waits. An
  -- UPDATE that waited for the shard and then found its share used up keeps it locked: the
  -- block's rollback (raising MT001) lets it go, with the row, so that a create that goes on below
  -- holds no shard when it locks them all.
  BEGIN
    INSERT INTO mcp_tasks.tasks (task_id, owner_key, status, created_at, expires_at, terminal_at,
        held_by, tool_name, version, record)
      VALUES (p_task_id, p_owner_key, p_status, p_created_at, p_expires_at, p_terminal_at,
        p_held_by, p_tool_name, p_version, p_record);
    UPDATE mcp_tasks.row_shards SET n = n + 1 - v_gone
      WHERE shard = v_shard
        AND (p_max_rows IS NULL OR (max_rows = p_max_rows AND n + 1 - v_gone <= cap));
    IF FOUND THEN RETURN 1; END IF;
    RAISE EXCEPTION USING ERRCODE = 'MT001';
  EXCEPTION
    WHEN unique_violation THEN
      IF v_gone > 0 THEN
        UPDATE mcp_tasks.row_shards SET n = n - v_gone WHERE shard = v_shard;
      END IF;
      RETURN -1;
    WHEN SQLSTATE 'MT001' THEN
      NULL;
  END;
  -- A store full as last committed, with nothing expired to remove, refuses at once, without a
  -- write or a lock (as if before the removals still under way); a taken id is still -1.
  IF v_gone = 0 AND (SELECT sum(n) >= p_max_rows FROM mcp_tasks.row_shards)
    AND NOT EXISTS (SELECT 1 FROM mcp_tasks.tasks WHERE expires_at <= p_now) THEN
    RETURN CASE WHEN EXISTS (SELECT 1 FROM mcp_tasks.tasks WHERE task_id = p_task_id)
      THEN -1 ELSE 0 END;
  END IF;
  INSERT INTO mcp_tasks.tasks (task_id, owner_key, status, created_at, expires_at, terminal_at,
      held_by, tool_name, version, record)
    VALUES (p_task_id, p_owner_key, p_status, p_created_at, p_expires_at, p_terminal_at,
      p_held_by, p_tool_name, p_version, p_record)
    ON CONFLICT (task_id) DO NOTHING;
  IF NOT FOUND THEN
    IF v_gone > 0 THEN
      UPDATE mcp_tasks.row_shards SET n = n - v_gone WHERE shard = v_shard;
    END IF;
    RETURN -1;
  END IF;
  -- Its share used up (or made for another maxRows): judged on the total, under every shard,
  -- locked in order.
  PERFORM 1 FROM mcp_tasks.row_shards ORDER BY shard FOR UPDATE;
  IF v_gone > 0 THEN
    UPDATE mcp_tasks.row_shards SET n = n - v_gone WHERE shard = v_shard;
  END IF;
  v_rows := mcp_tasks.share_rows(p_max_rows, v_shard);
  IF v_rows >= p_max_rows THEN
    -- Expired tasks never count: they go first (by the expiry index), then the count is judged.
    WITH gone AS (
      DELETE FROM mcp_tasks.tasks WHERE task_id IN (
        SELECT task_id FROM mcp_tasks.tasks WHERE expires_at <= p_now FOR UPDATE SKIP LOCKED)
      RETURNING 1)
    SELECT count(*) INTO v_expired FROM gone;
    IF v_expired > 0 THEN
      UPDATE mcp_tasks.row_shards SET n = n - v_expired WHERE shard = v_shard;
      v_rows := mcp_tasks.share_rows(p_max_rows, v_shard);
    END IF;
    IF v_rows >= p_max_rows THEN
      DELETE FROM mcp_tasks.tasks WHERE task_id = p_task_id;
      RETURN 0;
    END IF;
  END IF;
  -- Room for one at least, and this shard had the first of it.
  UPDATE mcp_tasks.row_shards SET n = n + 1 WHERE shard = v_shard;
  RETURN 1;
END $$;

-- Stores a new task the one-statement create of the store did not (the owner at its count, the
-- connection's share of maxRows used up, or the id taken): locks the owner's row of owner_rows,
-- judges the create in full (judge_create, whose answer it returns), then counts the owner's rows
-- again, exactly (expired ones too, until they are removed).
CREATE OR REPLACE FUNCTION mcp_tasks.create_task(
  p_task_id text, p_owner_key text, p_status text, p_created_at bigint, p_expires_at bigint,
  p_terminal_at bigint, p_held_by text, p_tool_name text, p_version bigint, p_record json,
  p_max_rows bigint, p_max_per_owner bigint, p_now bigint
) RETURNS integer LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  v_owner bytea := mcp_tasks.owner_hash(p_owner_key);
  v_status integer;
  v_rows bigint;
BEGIN
  -- The owner's row, locked (made first if the owner has none): a lock, not a new row version,
  -- so that an owner refused at its quota again and again leaves no dead rows behind.
  PERFORM 1 FROM mcp_tasks.owner_rows WHERE owner_hash = v_owner FOR UPDATE;
  IF NOT FOUND THEN
    INSERT INTO mcp_tasks.owner_rows (owner_hash, n) VALUES (v_owner, 0)
      ON CONFLICT (owner_hash) DO NOTHING;
    PERFORM 1 FROM mcp_tasks.owner_rows WHERE owner_hash = v_owner FOR UPDATE;
  END IF;
  v_status := mcp_tasks.judge_create(p_task_id, p_owner_key, p_status, p_created_at,
    p_expires_at, p_terminal_at, p_held_by, p_tool_name, p_version, p_record, p_now, p_max_rows,
    p_max_per_owner);
  SELECT count(*) INTO v_rows FROM mcp_tasks.tasks WHERE mcp_tasks.owner_hash(owner_key) = v_owner;
  UPDATE mcp_tasks.owner_rows SET n = v_rows WHERE owner_hash = v_owner AND n <> v_rows;
  RETURN v_status;
END $$;

-- Deletes a task; returns whether it was there. Its row is taken off its owner's count and off
-- the connection's shard.
CREATE OR REPLACE FUNCTION mcp_tasks.delete_task(p_task_id text)
RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  v_owner_key text;
BEGIN
  DELETE FROM mcp_tasks.tasks WHERE task_id = p_task_id RETURNING owner_key INTO v_owner_key;
  IF NOT FOUND THEN RETURN false; END IF;
  UPDATE mcp_tasks.owner_rows SET n = n - 1
    WHERE owner_hash = mcp_tasks.owner_hash(v_owner_key);
  UPDATE mcp_tasks.row_shards SET n = n - 1 WHERE shard = mcp_tasks.own_shard();
  RETURN true;
END $$;

-- Removes at most p_batch tasks past their expiry (p_now) and at most p_batch finished tasks
-- without a TTL that finished at p_terminal_before or earlier, both by their index, and takes
-- them off their owners' counts (the owners' rows locked in the order of their hashes) and off
-- one shard of the row count. Returns how many tasks it removed (the caller calls again while a
-- batch comes back full).
CREATE OR REPLACE FUNCTION mcp_tasks.cleanup_tasks(
  p_now bigint, p_terminal_before bigint, p_batch integer
) RETURNS bigint LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  v_expired bytea[];
  v_finished bytea[];
  v_owners bytea[];
BEGIN
  WITH gone AS (
    DELETE FROM mcp_tasks.tasks WHERE task_id IN (
      SELECT task_id FROM mcp_tasks.tasks WHERE expires_at <= p_now LIMIT p_batch)
    RETURNING mcp_tasks.owner_hash(owner_key) AS owner)
  SELECT coalesce(array_agg(owner), '{}') INTO v_expired FROM gone;
  WITH gone AS (
    DELETE FROM mcp_tasks.tasks WHERE task_id IN (
      SELECT task_id FROM mcp_tasks.tasks WHERE terminal_at <= p_terminal_before LIMIT p_batch)
    RETURNING mcp_tasks.owner_hash(owner_key) AS owner)
  SELECT coalesce(array_agg(owner), '{}') INTO v_finished FROM gone;
  v_owners := v_expired || v_finished;
  IF cardinality(v_owners) = 0 THEN RETURN 0; END IF;
  PERFORM 1 FROM mcp_tasks.owner_rows WHERE owner_hash = ANY(v_owners)
    ORDER BY owner_hash FOR UPDATE;
  UPDATE mcp_tasks.owner_rows o SET n = o.n - gone.n
    FROM (SELECT owner, count(*) AS n FROM unnest(v_owners) AS owner GROUP BY owner) gone
    WHERE o.owner_hash = gone.owner;
  UPDATE mcp_tasks.row_shards SET n = n - cardinality(v_owners)
    WHERE shard = mcp_tasks.own_shard();
  RETURN cardinality(v_owners);
END $$;

-- Counts the table again, for after rows were added or removed by hand: the owners' counts and
-- the row count (under every shard, with the shares to be made again by the next create).
CREATE OR REPLACE FUNCTION mcp_tasks.recount_tasks()
RETURNS bigint LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  v_rows bigint;
BEGIN
  LOCK TABLE mcp_tasks.owner_rows IN EXCLUSIVE MODE;
  PERFORM 1 FROM mcp_tasks.row_shards ORDER BY shard FOR UPDATE;
  DELETE FROM mcp_tasks.owner_rows;
  INSERT INTO mcp_tasks.owner_rows (owner_hash, n)
    SELECT mcp_tasks.owner_hash(owner_key), count(*) FROM mcp_tasks.tasks GROUP BY 1;
  SELECT count(*) INTO v_rows FROM mcp_tasks.tasks;
  UPDATE mcp_tasks.row_shards
    SET n = CASE WHEN shard = 0 THEN v_rows ELSE 0 END, cap = NULL, max_rows = NULL;
  RETURN v_rows;
END $$;

INSERT INTO mcp_tasks.schema_version (version, description)
  VALUES (1, 'tasks, instances, row_shards, owner_rows and the functions of the store')
  ON CONFLICT (version) DO NOTHING;
