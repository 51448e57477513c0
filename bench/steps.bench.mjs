// Step benchmark for nestjs-mcp-tasks: what `task.step` costs (issue 39), on the in-memory store,
// a private Redis and a private PostgreSQL, against baselines measured in the same run.
//
//   npm run bench:steps   (builds dist/, then runs this file)
//
// Each step returns a small result (`{ id: 'ch_<i>' }`), as a payment or an email id would be.
//
//   (a) Per step: whole calls of a task tool whose method takes 10 steps, against the same tool
//       with no step (the baseline call: create, the method, the completion). The per-step cost
//       is (call with 10 steps − baseline call) ÷ 10, in ms and as a ratio to the baseline call.
//       Target: per step ÷ baseline call ≤ 0.5 on every store.
//   (b) A step against a status message write (`task.progress`, which reads the task then writes
//       it: two round trips), timed one by one inside a method that alternates them (who goes
//       first alternating). A step writes without a read: one round trip. Target: step ÷ progress
//       ≤ 0.6 on Redis and on PostgreSQL (about half: one round trip where progress makes two,
//       plus the CPU both share), ≤ 1.0 on memory (a step never costs more than a status message).
//   (c) Store calls per step, counted by a proxy over the real store (as test/tools/steps.spec.ts
//       counts them), each call attributed to the step that made it: exactly 1 compareAndSet and
//       0 get per step, on every store. Beside it, the Redis round trips per step (counted on the
//       store's ioredis client) and the PostgreSQL statements per step (on its pg pool): 1 each.
//       Progress, for context: 1 get and 1 compareAndSet.
//
// The targets were set before the first run and are kept whatever a run gives.
