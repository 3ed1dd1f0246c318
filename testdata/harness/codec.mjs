// Runs pure functions of the published DeepSeek Harness's session package
// (@deepseek-ai/dsh-session) over inputs and prints their outcomes as JSON,
// for differential tests of sessionflow's own implementations.
//
// Input (stdin): {"ops": [op...]}
// op: {"op": "known"}            the package's KNOWN_SESSION_EVENT_TYPES, as given
//     {"op": "pack", "events": [...]}
//         packChunkRuns over the batch: the storage lines, one string each
//     {"op": "decode", "lines": [...]}
//         decodeStorageRecord over each line's JSON.parse: the events
// Output (stdout): one JSON array with {"ok": value} or {"error": message}
// per op.
import { KNOWN_SESSION_EVENT_TYPES, packChunkRuns, decodeStorageRecord } from '@deepseek-ai/dsh-session';

const chunks = [];
for await (const c of process.stdin) chunks.push(c);
const input = JSON.parse(Buffer.concat(chunks).toString('utf8'));

const out = [];
for (const op of input.ops) {
  try {
    switch (op.op) {
      case 'known': out.push({ ok: [...KNOWN_SESSION_EVENT_TYPES] }); break;
      case 'pack': out.push({ ok: packChunkRuns(op.events).map((r) => JSON.stringify(r)) }); break;
      case 'decode': out.push({ ok: op.lines.flatMap((l) => decodeStorageRecord(JSON.parse(l))) }); break;
      default: throw new Error(`unknown op ${op.op}`);
    }
  } catch (e) {
    out.push({ error: String(e?.message ?? e) });
  }
}
process.stdout.write(JSON.stringify(out) + '\n');
