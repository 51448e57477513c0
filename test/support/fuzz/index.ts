import { family, type Targets } from './cases.js';
import { brokenJson, hugeBodies } from './bodies.js';
import { envelopes, notifications, unknownMethods } from './json-rpc.js';
import { listen, taskMethods, toolsCall, updateValues } from './params.js';
import { contentTypes, headers } from './headers.js';
import { protoKeys } from './proto-keys.js';
import { deepNesting, hugeValues } from './sizes.js';
import { httpForms } from './http-forms.js';
import { legacyTasks } from './legacy.js';

/**
 * Generators for fuzz.e2e-spec.ts: malformed requests to the MCP endpoint, each with the answers
 * the endpoint may give it. Every generated request is wrong in at least one way the endpoint must
 * refuse (or, for a notification, must accept without acting on); the expected answers are worked
 * out per case from the rules the endpoint implements (see errors.e2e-spec.ts and src/mcp).
 *
 * Bodies are built as JSON *text* (Obj keeps its entries in order, so `__proto__`, `constructor`
 * and `prototype` are real own keys once the server parses them, and keys may repeat); strings that
 * the server may echo back are drawn from an alphabet without `/`, `:`, `<`, `\` and newlines, so
 * the leak checks (stack traces, file paths, HTML) can only fire on what the server adds itself.
 *
 * The parts: json.ts (JSON text), outcomes.ts (the answers a case may get), cases.ts (what a case
 * is), requests.ts (standard headers and well-formed messages), values.ts (odd values); then the
 * families, one file per group: bodies.ts, json-rpc.ts, params.ts, headers.ts, proto-keys.ts,
 * sizes.ts, http-forms.ts, legacy.ts (the 2025-11-25 era). `families` below names them for fuzz.e2e-spec.ts.
 */

// ----- families, by name -----------------------------------------------------------------------

export const families = {
  brokenJson,
  hugeBodies,
  envelopes: (t: Targets) => family('envelope')(envelopes(t)),
  notifications: (t: Targets) => family('notifications')(notifications(t)),
  unknownMethods: (t: Targets) => family('unknown-method')(unknownMethods(t)),
  toolsCall: (t: Targets) => family('tools-call')(toolsCall(t)),
  taskMethods: (t: Targets) => family('task-methods')(taskMethods(t)),
  updateValues: (t: Targets) => family('update-values')(updateValues(t)),
  listen: (t: Targets) => family('listen')(listen(t)),
  headers,
  contentTypes,
  protoKeys,
  deepNesting,
  hugeValues,
  httpForms,
  legacyTasks: (t: Targets) => family('legacy-tasks')(legacyTasks(t)),
};
