// Runs a list of operations of the published DeepSeek Harness JSONL
// persistence backend over one root and prints their outcomes as JSON.
//
// Input (stdin): {"root": "...", "compression": "none"|"zstd", "ops": [op...]}
// op: {"op": "create", "meta": {...}}
//     {"op": "append", "id": "...", "events": [...]}
//     {"op": "load" | "inspect" | "readRaw", "id": "..."}
//     {"op": "readFrom", "id": "...", "fromSeq": n}
//     {"op": "list"}
//     {"op": "signal", "path": "..."}  creates an empty file
//     {"op": "await", "path": "...", "timeoutMs"?: n}  waits until a file exists
//     {"op": "live", "id": "...", "seed"?: [...], "meta"?: {...}, "append": [[type, data]...]}
//         creates a live Session through the SessionStore (seeded when
//         seed is given), appends the events and flushes them to storage
//     {"op": "fork", "source": "...", "boundary"?: n, "child": "...", "append": [[type, data]...]}
//         forks a loaded session into a live child, appends and flushes
//     {"op": "resume", "id": "...", "append": [[type, data]...]}
//         prepares the stored session, publishes it live, appends and flushes
//     {"op": "messages", "id": "..."}
//         prepares the stored session and returns the conversation the
//         harness derives from it (Session.deriveMessages)
// Output (stdout): one JSON array with {"ok": value} or {"error": message,
// "name": class} per op. Every op runs even after a failure.
import { Context } from '@deepseek-ai/cordis';
import SessionStore from '@deepseek-ai/dsh-session';
import Jsonl from '@deepseek-ai/dsh-session-persistence-jsonl';
import { existsSync, writeFileSync } from 'node:fs';

const chunks = [];
for await (const c of process.stdin) chunks.push(c);
const input = JSON.parse(Buffer.concat(chunks).toString('utf8'));

const ctx = new Context();
ctx.plugin(SessionStore);
ctx.plugin(Jsonl, { root: input.root, compression: input.compression, writeBatchMaxDelayMs: 1 });
for (let i = 0; i < 200 && !ctx.sessionPersistence; i++) await new Promise((r) => setTimeout(r, 5));
const p = ctx.sessionPersistence;
if (!p) throw new Error('the JSONL persistence service did not start');

async function live(session, appends) {
  for (const [type, data] of appends ?? []) session.append(type, data);
  await ctx.sessions.flush(session);
  return session.events;
}

const out = [];
for (const op of input.ops) {
  try {
    let v;
    switch (op.op) {
      case 'create': v = await p.create(op.meta); break;
      case 'append': v = await p.append(op.id, op.events); break;
      case 'load': v = await p.load(op.id); break;
      case 'inspect': v = await p.inspect(op.id); break;
      case 'readRaw': v = await p.readRaw(op.id); break;
      case 'readFrom': v = await p.readFrom(op.id, op.fromSeq ?? 0); break;
      case 'list': v = await p.list(); break;
      case 'signal': writeFileSync(op.path, ''); break;
      case 'await': {
        const until = Date.now() + (op.timeoutMs ?? 60000);
        while (!existsSync(op.path)) {
          if (Date.now() > until) throw new Error(`timed out waiting for ${op.path}`);
          await new Promise((r) => setTimeout(r, 10));
        }
        break;
      }
      case 'live': {
        const s = ctx.sessions.create(op.id, { seed: op.seed, meta: op.meta });
        v = await live(s, op.append);
        break;
      }
      case 'fork': {
        let src = ctx.sessions.get(op.source);
        if (!src) {
          src = (await p.prepare(op.source)).session;
          ctx.sessions.enter(src);
          ctx.sessions.announce(src);
        }
        const child = ctx.sessions.fork(src, op.boundary, op.child);
        v = await live(child, op.append);
        break;
      }
      case 'resume': {
        const prep = await p.prepare(op.id);
        const s = prep.session;
        ctx.sessions.enter(s);
        ctx.sessions.announce(s);
        v = await live(s, op.append);
        break;
      }
      case 'messages': v = (await p.prepare(op.id)).session.deriveMessages(); break;
      default: throw new Error(`unknown op ${op.op}`);
    }
    out.push({ ok: v ?? null });
  } catch (e) {
    out.push({ error: String(e?.message ?? e), name: e?.name ?? typeof e });
  }
}
ctx.registry?.delete?.(Jsonl);
// Exit only once stdout is flushed: a pipe is written asynchronously, and an
// exit before that cuts a large output short.
process.stdout.write(JSON.stringify(out) + '\n', () => process.exit(0));
