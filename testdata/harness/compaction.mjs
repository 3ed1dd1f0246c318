// Reads the compactions of loaded logs with the published packages, for the
// compaction differential test (testsuite/harness/compaction_diff_test.go):
// the conversation the harness derives from a log, the token meter's price
// of what each compaction record shadows, and the tool pairing of the
// surface each compaction read.
//
// Input (stdin): one JSON object per line, {"meta": {...}, "events": [...]},
// a log as the JSONL backend's load returns it (judge.mjs's verdict).
// Output (stdout): one JSON object per input line, in order:
//   {"messages": [...],
//    "summaries": [{"seq", "surface": [...], "prices": [...], "balancedAfter"}],
//    "prunes": [{"seq", "price"}],
//    "liveError", "liveErrorName"}
// or {"error", "errorName"} when a package throws on the log.
// messages is Session.deriveMessages() of the session restored from the
// events (Session.fromRestore, as the backend's prepare restores one): the
// surface fold's nodes, each projected by deriveEventMessage.
// For each compaction/summary at seq: surface is the surface nodes of the
// session restored from the events before it (what its compaction read:
// the bracket's start adds no node), prices the token meter's price of each
// of its shadowedSeqs as the meter's surface fold prices a node
// (estimateMessage of the node's derived message, 0 for an event that
// derives none), and balancedAfter whether the cut after its shadowedRange
// end is tool-pairing balanced on that surface (toolPairingBalancedAfter of
// @deepseek-ai/dsh-compaction, the check the harness's compaction makes
// before it cuts).
// For each compaction/prune at seq: price is the token meter's price of the
// message of the tool/result it shadows (the harness's pruner records
// estimateMessage of the original result's message).
// liveError is what the harness's session invariants (the companions of
// @deepseek-ai/dsh-session and @deepseek-ai/dsh-compaction, mounted as
// judge.mjs mounts them) throw when the events the log's last run wrote
// are appended to a live session one by one, as the harness's own agent
// appends them: the events up to the log's last session/end-seed marker
// seed the session (none for a log without one: the session starts
// empty), every later event is appended live with its surfaceOp and
// sourceEventSeqs; "" (absent) when they pass. judge.mjs replays a whole
// log as a seed, where a compaction/start left open before the end-seed
// marker it appends is a crash's remnant; appended live, a turn boundary
// crossing an open compaction is refused.
import { Context } from '@deepseek-ai/cordis';
import InvariantRegistry from '@deepseek-ai/dsh-invariants';
import SessionStore, { Session, deriveEventMessage } from '@deepseek-ai/dsh-session';
import * as SessionInvariant from '@deepseek-ai/dsh-session/invariant';
import { toolPairingBalancedAfter } from '@deepseek-ai/dsh-compaction';
import * as CompactionInvariant from '@deepseek-ai/dsh-compaction/invariant';
import TokenMeter from '@deepseek-ai/dsh-token-meter';
import { createInterface } from 'node:readline';

const ctx = new Context();
await ctx.plugin(TokenMeter);
for (let i = 0; i < 1000 && !ctx.tokenMeter; i++) await new Promise((r) => setTimeout(r, 0));
const meter = ctx.tokenMeter;
if (!meter) throw new Error('the token meter service did not start');

const invariantCtx = new Context();
await invariantCtx.plugin(SessionStore);
await invariantCtx.plugin(InvariantRegistry, { enabled: true });
await invariantCtx.plugin(SessionInvariant);
await invariantCtx.plugin(CompactionInvariant);
if (!invariantCtx.sessions || !invariantCtx.invariants) throw new Error('the invariant service did not start');

/**
 * Appends the events after the log's last end-seed marker to a live
 * session seeded with the ones before (see liveError above) and returns
 * the error that throws.
 */
function liveViolation(meta, events) {
  const sessions = invariantCtx.sessions;
  let seed = 0;
  events.forEach((e, i) => {
    if (e.type === 'session/end-seed') seed = i + 1;
  });
  let detach;
  try {
    const session = seed > 0
      ? sessions.prepare(meta.id, { seed: events.slice(0, seed).map((e) => structuredClone(e)), meta: structuredClone(meta), seedSource: 'persistence' })
      : sessions.prepare(meta.id, { meta: structuredClone(meta) });
    detach = sessions.enter(session);
    sessions.announce(session);
    for (const e of events.slice(seed)) {
      const opts = {};
      if (e.surfaceOp !== undefined) opts.surfaceOp = structuredClone(e.surfaceOp);
      if (e.sourceEventSeqs !== undefined) opts.sourceEventSeqs = [...e.sourceEventSeqs];
      const got = session.append(e.type, structuredClone(e.data), opts);
      if (got?.seq !== undefined && got.seq !== e.seq) throw new Error(`the live session appended seq ${got.seq} for the log's ${e.seq}`);
    }
    return undefined;
  } catch (e) {
    return e;
  } finally {
    detach?.();
  }
}

/** The meter's price of the surface node an event is. */
function price(event) {
  const message = deriveEventMessage(event);
  return message === null ? 0 : meter.estimateMessage(message);
}

/** A session restored from events, as the backend's prepare restores one. */
function restore(meta, events) {
  return Session.fromRestore(meta.id, events.map((e) => structuredClone(e)), structuredClone(meta));
}

function read({ meta, events }) {
  const out = { messages: restore(meta, events).deriveMessages(), summaries: [], prunes: [] };
  for (const e of events) {
    if (e.type === 'compaction/summary') {
      const before = restore(meta, events.slice(0, e.seq));
      out.summaries.push({
        seq: e.seq,
        surface: before.surface.nodes,
        prices: e.data.shadowedSeqs.map((seq) => price(events[seq])),
        balancedAfter: toolPairingBalancedAfter(before, e.data.shadowedRange.end),
      });
    } else if (e.type === 'compaction/prune') {
      out.prunes.push({ seq: e.seq, price: meter.estimateMessage(events[e.data.shadowedRange.start].data.message) });
    }
  }
  const violation = liveViolation(meta, events);
  if (violation !== undefined) {
    out.liveError = String(violation?.message ?? violation);
    out.liveErrorName = violation?.name ?? typeof violation;
  }
  return out;
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
