// Reads the permission knobs and the open approvals of loaded logs with the
// published packages, for the permission differential test
// (testsuite/harness/permissions_diff_test.go).
//
// Input (stdin): one JSON object per line, {"meta": {...}, "events": [...]},
// a log as the JSONL backend's load returns it (judge.mjs's verdict).
// Output (stdout): one JSON object per input line, in order:
//   {"folds": [{"index", "sandboxMode"?, "approvalPolicy"?, "preset"?,
//               "pending": [{"seq", "id", "toolName", "callId"?, "reason"?,
//                            "openTurn"}]}]}
// or {"error", "errorName"} when a package throws on the log.
// The events are those of the session restored from the log
// (Session.fromRestore, as the backend's prepare restores one): session.events,
// what the harness's services fold. For each prefix of them (events 0..index)
// the harness's own folds give sandboxMode (effectiveSandboxMode of
// @deepseek-ai/dsh-sandbox-policy), approvalPolicy (effectiveApprovalPolicy
// of @deepseek-ai/dsh-user-approval) and preset (effectivePermissionPreset of
// @deepseek-ai/dsh-permission-presets), each the value of the last event of
// its type as logged, whatever it is (absent when there is none, or when
// that event's data has no such field); folds lists the prefix's folds
// where they differ from the previous prefix's (the first prefix's always),
// so a log's last entry holds its folds at the end.
// pending are the approvals asked without a decision: the user-approval
// companion's (@deepseek-ai/dsh-user-approval/invariant) pairing, which the
// package does not export and which this script follows step for step: an
// approval/asked adds its id to the pending set, an approval/decided removes
// its id, whatever the turn (the companion refuses an ask or a decision
// outside an open turn, a decision for an id not pending, an ask for an id
// pending). Each is its ask's seq and data, with openTurn: no turn/end
// follows the ask in the prefix (the harness's service asks and decides
// inside one call, in the turn it asks in: a turn/end after an ask without
// its decision is a crash's closer, and no later turn decides it).
import { Session } from '@deepseek-ai/dsh-session';
import { effectiveApprovalPolicy } from '@deepseek-ai/dsh-user-approval';
import { effectiveSandboxMode } from '@deepseek-ai/dsh-sandbox-policy';
import { effectivePermissionPreset } from '@deepseek-ai/dsh-permission-presets';
import { createInterface } from 'node:readline';

function read({ meta, events }) {
  const session = Session.fromRestore(meta.id, events.map((e) => structuredClone(e)), structuredClone(meta));
  const all = session.events;
  const folds = [];
  // pending: the companion's set, id → the ask (insertion order).
  const pending = new Map();
  let last = '';
  for (let index = 0; index < all.length; index++) {
    const event = all[index];
    if (event.type === 'approval/asked') {
      const { id, toolName, callId, reason } = event.data;
      pending.set(id, { seq: event.seq, id, toolName, callId, reason, openTurn: true });
    } else if (event.type === 'approval/decided') {
      pending.delete(event.data.id);
    } else if (event.type === 'turn/end') {
      for (const ask of pending.values()) ask.openTurn = false;
    }
    const prefix = all.slice(0, index + 1);
    const fold = {
      sandboxMode: effectiveSandboxMode(prefix),
      approvalPolicy: effectiveApprovalPolicy(prefix),
      preset: effectivePermissionPreset(prefix),
      pending: [...pending.values()].map((ask) => ({ ...ask })),
    };
    const text = JSON.stringify(fold);
    if (text !== last) {
      folds.push({ index, ...fold });
      last = text;
    }
  }
  return { folds };
}

for await (const line of createInterface({ input: process.stdin, crlfDelay: Infinity })) {
  if (line === '') continue;
  let out;
  try {
    out = read(JSON.parse(line));
  } catch (e) {
    out = { error: String(e?.stack ?? e?.message ?? e), errorName: e?.name ?? typeof e };
  }
  process.stdout.write(JSON.stringify(out) + '\n');
}
// Exit only once stdout is flushed: a pipe is written asynchronously.
process.stdout.write('', () => process.exit(0));
