// Starts the published JSONL persistence backend over one root, for the
// scripts that work root by root (restore.mjs, judge.mjs).
import { Context } from '@deepseek-ai/cordis';
import SessionStore from '@deepseek-ai/dsh-session';
import Jsonl from '@deepseek-ai/dsh-session-persistence-jsonl';

/**
 * Starts the backend over root in an encoding ("none" or "zstd") and returns
 * its service with a close function that disposes it.
 */
export async function openRoot(root, compression) {
  const ctx = new Context();
  ctx.plugin(SessionStore);
  const fiber = ctx.plugin(Jsonl, { root, compression, writeBatchMaxDelayMs: 1 });
  for (let i = 0; i < 1000 && !ctx.sessionPersistence; i++) await new Promise((r) => setTimeout(r, 0));
  if (!ctx.sessionPersistence) throw new Error('the JSONL persistence service did not start');
  return { p: ctx.sessionPersistence, close: async () => { await fiber.dispose?.(); } };
}

/** Reads all of stdin as JSON. */
export async function readInput() {
  const chunks = [];
  for await (const c of process.stdin) chunks.push(c);
  return JSON.parse(Buffer.concat(chunks).toString('utf8'));
}
