// Writes sessions through the published JSONL backend, each into a root of
// its own, without loading them back (a load would store the closers of an
// interrupted turn): create, then one append of every event, so the bytes on
// disk are what the backend writes (runs of chunk deltas packed by its
// packChunkRuns).
//
// Input (stdin): {"sessions": [{"root", "compression", "meta", "events"}]}
// Output (stdout): one JSON array, one entry per session: {"error"?, "errorName"?}.
import { openRoot, readInput } from './root.mjs';

const input = await readInput();
const out = [];
for (const { root, compression, meta, events } of input.sessions) {
  const { p, close } = await openRoot(root, compression);
  try {
    await p.create(meta);
    await p.append(meta.id, events);
    out.push({});
  } catch (e) {
    out.push({ error: String(e?.message ?? e), errorName: e?.name ?? typeof e });
  } finally {
    await close();
  }
}
// Exit only once stdout is flushed: a pipe is written asynchronously.
process.stdout.write(JSON.stringify(out) + '\n', () => process.exit(0));
