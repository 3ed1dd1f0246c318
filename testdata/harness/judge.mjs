// Judges session logs with the published harness's own code, for the
// differential suite (testsuite/harness/differential_test.go): for each
// session it runs the JSONL backend's load (its validator, its repair closers
// and the surface validation of the Session it restores) and, when the load
// accepts the log, foldSurface of @deepseek-ai/dsh-session over the loaded
// events. One process judges many sessions, each in a root of its own.
//
// Input (stdin): one JSON object per line, {"root", "compression", "id",
// "plain"?}, where plain is a file holding the log's plaintext (the log
// itself for a raw root). The caller may write a line only once it is done
// with that root: the package's load writes its repairs into the log.
// Output (stdout): one JSON object per input line, in order:
//   {"accepted": bool, "error", "errorName",
//    "events": [...] (as loaded, closers included), "meta",
//    "nodes": [...], "replacements": [{seq, start, end, shadowedSeqs}],
//    "foldError", "roundTripDiffers": bool}
// roundTripDiffers is true when some complete line of plain is not byte for
// byte JSON.stringify(JSON.parse(line)): a line the package's writer could
// not have written as it is (a repeated key, -0, a number beyond float64,
// invalid UTF-8, ...). A line that does not parse is left out of that test.
import { foldSurface } from '@deepseek-ai/dsh-session';
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { openRoot } from './root.mjs';

/** Whether a complete line of the file does not survive a parse/stringify round trip. */
function roundTripDiffers(path) {
  let bytes;
  try {
    bytes = readFileSync(path);
  } catch {
    return false;
  }
  let start = 0;
  for (let nl = bytes.indexOf(10); nl !== -1; nl = bytes.indexOf(10, start)) {
    const line = bytes.subarray(start, nl);
    start = nl + 1;
    let again;
    try {
      again = Buffer.from(JSON.stringify(JSON.parse(line.toString('utf8'))), 'utf8');
    } catch {
      continue;
    }
    if (!again.equals(line)) return true;
  }
  return false;
}

async function judge({ root, compression, id, plain }) {
  const out = { roundTripDiffers: plain === undefined ? false : roundTripDiffers(plain) };
  const { p, close } = await openRoot(root, compression);
  try {
    const loaded = await p.load(id);
    out.accepted = true;
    out.meta = loaded.meta;
    out.events = loaded.events;
    try {
      const fold = foldSurface(loaded.events);
      out.nodes = fold.nodes;
      out.replacements = fold.replacements;
    } catch (e) {
      out.foldError = String(e?.message ?? e);
    }
  } catch (e) {
    out.accepted = false;
    out.error = String(e?.message ?? e);
    out.errorName = e?.name ?? typeof e;
  } finally {
    await close();
  }
  return out;
}

// Up to CONCURRENCY sessions are judged at once (each in its own root and
// backend instance), so one's file I/O overlaps another's work; verdicts
// are written in input order.
const CONCURRENCY = 4;
const pending = [];
for await (const line of createInterface({ input: process.stdin, crlfDelay: Infinity })) {
  if (line === '') continue;
  pending.push(judge(JSON.parse(line)));
  while (pending.length >= CONCURRENCY) process.stdout.write(JSON.stringify(await pending.shift()) + '\n');
}
while (pending.length > 0) process.stdout.write(JSON.stringify(await pending.shift()) + '\n');
// Exit only once stdout is flushed: a pipe is written asynchronously.
process.stdout.write('', () => process.exit(0));
