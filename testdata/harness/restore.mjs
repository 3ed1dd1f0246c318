// Restores the session logs of the harness corpus (testdata/harness-corpus)
// the way the published JSONL backend writes them, and has that backend
// write and load each one.
//
// The harness repository stores its snapshot logs normalised: events without
// seq and time, packed chunk rows without seq0 and time0, run-specific values
// replaced by placeholders ({{cwd}}, {{sessionId}}, ...), and some headers
// without delegationDepth. This script undoes that, deterministically:
//   - every placeholder gets a real value (restoreText below);
//   - a header without delegationDepth gets 0;
//   - the records are numbered in order: an event gets the next seq, a packed
//     row the seq of its first member (seq0) and so one seq per member, and
//     the package's decodeStorageRecord expands the row into its events;
//   - an event's time is createdAt + seq; a packed row's time0 is createdAt +
//     seq0 and its members keep the stored gaps (dt).
// Then, for each log and each requested encoding, it creates the session in
// a root of its own through the package (create + one append of every event,
// so the bytes on disk are what the backend writes, chunk runs packed by its
// packChunkRuns) and loads it back.
//
// Input (stdin): {"cwd": "/abs/workspace", "outDir": "/abs/dir",
//   "compressions": ["none", "zstd"], "logs": [{"rel": "...", "path": "..."}]}
// Output (stdout): one JSON array, one entry per log and encoding:
//   {"rel", "compression", "root", "id", "events", "rows", "loaded", "error", "errorName"}
// where rows counts the packed rows of the normalised input and loaded
// reports whether the package's load accepted the restored log (error and
// errorName say why not).
import { decodeStorageRecord } from '@deepseek-ai/dsh-session';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { openRoot, readInput } from './root.mjs';

const ROW_TYPES = new Set(['text-chunks', 'reasoning-chunks', 'tool-call-chunks']);

/** A UUID-shaped id derived from a seed, so a restore is reproducible. */
function stableId(seed) {
  const h = createHash('sha256').update(seed).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-8${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

/**
 * Fills the placeholders of one normalised log. The values are JSON-string
 * safe (no quote, backslash or control character), except {{tools}}, which
 * only ever stands for a whole string value and becomes an empty tool list.
 */
function restoreText(text, rel, cwd) {
  const dir = dirname(rel);
  const values = {
    cwd,
    sessionId: stableId(`${rel}#sessionId`),
    messageId: stableId(`${rel}#messageId`),
    parent: stableId(`${dir}#parent`),
    'child-1': stableId(`${dir}#child-1`),
    'child-2': stableId(`${dir}#child-2`),
    rpcId: 'rpc-1',
    'workflow-run': 'workflow-run-1',
    system: 'You are a coding agent working in the user\'s workspace.',
    messagePrefix: `The workspace is ${cwd}.`,
  };
  let out = text.replaceAll('"{{tools}}"', '[]');
  out = out.replace(/\{\{([A-Za-z0-9_-]+)\}\}/g, (whole, name) => {
    const v = values[name];
    if (v === undefined) throw new Error(`${rel}: unknown placeholder ${whole}`);
    return v;
  });
  return out;
}

/**
 * Parses a restored log into its header (delegationDepth filled in) and its
 * numbered events; rows counts the packed rows it held.
 */
function restoreLog(text, rel) {
  const lines = text.split('\n');
  if (lines.at(-1) === '') lines.pop();
  const header = JSON.parse(lines[0]);
  if (header.type !== 'session') throw new Error(`${rel}: first line is not a session header`);
  if (header.delegationDepth === undefined) header.delegationDepth = 0;
  const { type: _type, ...meta } = header;
  const events = [];
  let rows = 0;
  for (const [i, line] of lines.slice(1).entries()) {
    const record = JSON.parse(line);
    if (record === null || typeof record !== 'object' || Array.isArray(record)) {
      throw new Error(`${rel}: line ${i + 2} is not an object`);
    }
    const seq = events.length;
    if (ROW_TYPES.has(record.type)) {
      rows++;
      const { type, data } = record;
      events.push(...decodeStorageRecord({ type, seq0: seq, time0: meta.createdAt + seq, data }));
      continue;
    }
    const { type, data, ...rest } = record;
    events.push({ type, seq, time: meta.createdAt + seq, data, ...rest });
  }
  return { meta, events, rows };
}

/** Writes a restored log into root through the package and loads it back. */
async function writeAndLoad(root, compression, meta, events) {
  const { p, close } = await openRoot(root, compression);
  try {
    await p.create(meta);
    await p.append(meta.id, events);
    try {
      await p.load(meta.id);
      return { loaded: true };
    } catch (e) {
      return { loaded: false, error: String(e?.message ?? e), errorName: e?.name ?? typeof e };
    }
  } finally {
    await close();
  }
}

async function main() {
  const input = await readInput();
  const out = [];
  for (const { rel, path } of input.logs) {
    const restored = restoreLog(restoreText(readFileSync(path, 'utf8'), rel, input.cwd), rel);
    for (const compression of input.compressions ?? ['none']) {
      const root = join(input.outDir, compression, rel.replace(/\.jsonl$/, ''));
      const r = await writeAndLoad(root, compression, restored.meta, restored.events);
      out.push({ rel, compression, root, id: restored.meta.id, events: restored.events.length, rows: restored.rows, ...r });
    }
  }
  // Exit only once stdout is flushed: a pipe is written asynchronously.
  process.stdout.write(JSON.stringify(out) + '\n', () => process.exit(0));
}

await main();
