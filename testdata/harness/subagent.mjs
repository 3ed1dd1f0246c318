// The subagent package's own reading of delegated children, for
// testsuite/harness: for each session it loads the log through the JSONL
// backend and folds its subagent/descriptor with foldSubagentDescriptor of
// @deepseek-ai/dsh-subagent (the model-hidden identity a child's provider
// appends inside its first turn), and returns what seedDescriptorTurn, the
// package's own writer of that event, appends for the folded descriptor.
//
// Input (stdin): {"sessions": [{"root", "compression", "id"}]}
// Output (stdout): one JSON array, one entry per session:
//   {"meta", "descriptor" (null when the log holds none), "seeded": [types
//    and data of the events seedDescriptorTurn returns], "error"}
import { foldSubagentDescriptor, seedDescriptorTurn } from '@deepseek-ai/dsh-subagent';
import { openRoot, readInput } from './root.mjs';

const input = await readInput();
const out = [];
for (const s of input.sessions) {
  const { p, close } = await openRoot(s.root, s.compression);
  try {
    const loaded = await p.load(s.id);
    const descriptor = foldSubagentDescriptor(loaded.events) ?? null;
    const seeded = descriptor === null ? [] : seedDescriptorTurn('probe', undefined, descriptor).map((e) => ({ type: e.type, data: e.data }));
    out.push({ meta: loaded.meta, descriptor, seeded, error: '' });
  } catch (e) {
    out.push({ meta: null, descriptor: null, seeded: [], error: `${e?.name}: ${e?.message}` });
  } finally {
    await close();
  }
}
process.stdout.write(JSON.stringify(out));
