// Judges session logs with the published harness's own code, for the
// differential suite (testsuite/harness/differential_test.go): for each
// session it runs the JSONL backend's load (its validator, its repair closers
// and the surface validation of the Session it restores) and, when the load
// accepts the log, foldSurface of @deepseek-ai/dsh-session over the loaded
// events and the harness's own session invariants over them. One process
// judges many sessions, each in a root of its own.
//
// Input (stdin): one JSON object per line, {"root", "compression", "id",
// "plain"?, "checkWriter"?, "checkDamage"?}, where plain is a file holding
// the log's plaintext (the log itself for a raw root); checkWriter asks for
// roundTripDiffers and stringifyThrows, checkDamage for damage (the caller
// asks where sessionflow's refusal is one they could exempt). The caller may
// write a line only once it is done with that root: the package's load
// writes its repairs into the log.
// Output (stdout): one JSON object per input line, in order:
//   {"accepted": bool, "error", "errorName",
//    "events": [...] (as loaded, closers included), "meta",
//    "nodes": [...], "replacements": [{seq, start, end, shadowedSeqs}],
//    "foldError", "roundTripDiffers": bool, "stringifyThrows": bool,
//    "invariantError", "invariantErrorName",
//    "damage": {"storedEvents", "lineEvents", "droppedAfterDamage"}}
// roundTripDiffers is true when some complete line of plain is not byte for
// byte JSON.stringify(JSON.parse(line)): a line the package's writer could
// not have written as it is (a repeated key, -0, a number beyond float64,
// invalid UTF-8, ...); stringifyThrows when JSON.stringify throws on the
// value of some complete line (nested deeper than it can recurse), which the
// package's writer therefore cannot write at all. A line that does not parse
// is left out of both tests. A verdict whose events JSON.stringify cannot
// write either is sent without them, with "verdictError" saying why.
//
// invariantError (when the load accepts) is what the harness's session
// invariants say of the loaded log: the companions of @deepseek-ai/dsh-session
// (turns, steps, surface), of @deepseek-ai/dsh-compaction (compaction
// brackets: start, summary, checkpoint and end in order, inside their turn
// or between turns), of @deepseek-ai/dsh-user-approval (each approval/asked
// and approval/decided inside an open turn, a decided only for an id asked
// and not yet decided, an ask's id not already open, a non-empty toolName,
// the outcomes and the approval/policy values of its vocabulary), of
// @deepseek-ai/dsh-sandbox-policy (sandbox/mode values of its vocabulary)
// and of @deepseek-ai/dsh-permission-presets (permission/preset naming a
// preset of the deployment's table: the shipped composition's, see
// SHIPPED_PRESETS below), each its package's ./invariant export, registered
// with the @deepseek-ai/dsh-invariants service. They validate every event a
// live session appends; the first three replay the log a session is seeded
// with when the session is announced, the last two the logs of the sessions
// in the store when they are installed. The judge seeds a session with the
// loaded events exactly as the package's resume does
// (SessionPersistence.prepare: sessions.prepare with seedSource
// "persistence"), enters and announces it in a context where the service and
// the first three companions are mounted (as the harness's own invariant
// tests set them up), then installs the last two while it is in the store,
// and reports the first error that throws ("" when none does).
//
// damage (raw roots only) counts, with the package's own scan
// (the backend's loadStored, read before the load repairs anything) and its
// decodeStorageRecord: storedEvents, the events of the committed prefix the
// scan keeps; lineEvents, the events the complete lines after the header
// decode to; droppedAfterDamage, the events of the complete lines after the
// first complete line the scan did not keep (its first damage), which the
// package drops without a word.
import { Context, Service } from '@deepseek-ai/cordis';
import InvariantRegistry from '@deepseek-ai/dsh-invariants';
import SessionStore, { decodeStorageRecord, foldSurface } from '@deepseek-ai/dsh-session';
import * as SessionInvariant from '@deepseek-ai/dsh-session/invariant';
import * as CompactionInvariant from '@deepseek-ai/dsh-compaction/invariant';
import ApprovalService from '@deepseek-ai/dsh-user-approval';
import * as ApprovalInvariant from '@deepseek-ai/dsh-user-approval/invariant';
import * as SandboxPolicyInvariant from '@deepseek-ai/dsh-sandbox-policy/invariant';
import PermissionPresetService from '@deepseek-ai/dsh-permission-presets';
import * as PermissionPresetsInvariant from '@deepseek-ai/dsh-permission-presets/invariant';
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { openRoot } from './root.mjs';

/** The complete lines of bytes after its first, with their offsets. */
function* completeLines(bytes) {
  let start = bytes.indexOf(10) + 1;
  if (start === 0) return;
  for (let nl = bytes.indexOf(10, start); nl !== -1; nl = bytes.indexOf(10, start)) {
    yield { line: bytes.subarray(start, nl), at: start };
    start = nl + 1;
  }
}

/**
 * How the complete lines of bytes survive the package's writer, which writes
 * a record as JSON.stringify(record): roundTripDiffers when some line that
 * parses is not byte for byte JSON.stringify(JSON.parse(line)),
 * stringifyThrows when JSON.stringify throws on some line that parses (a
 * value nested deeper than V8's JSON.stringify can recurse).
 */
function writerCheck(bytes) {
  const out = { roundTripDiffers: false, stringifyThrows: false };
  let start = 0;
  for (let nl = bytes.indexOf(10); nl !== -1; nl = bytes.indexOf(10, start)) {
    const line = bytes.subarray(start, nl);
    start = nl + 1;
    let value;
    try {
      value = JSON.parse(line.toString('utf8'));
    } catch {
      continue;
    }
    let again;
    try {
      again = Buffer.from(JSON.stringify(value), 'utf8');
    } catch {
      out.stringifyThrows = true;
      continue;
    }
    if (!again.equals(line)) out.roundTripDiffers = true;
  }
  return out;
}

/** How many events a storage record line decodes to with the package's decoder (0 if none). */
function recordEvents(line) {
  try {
    return decodeStorageRecord(JSON.parse(line.toString('utf8'))).length;
  } catch {
    return 0;
  }
}

/**
 * What the package's raw scan keeps and drops of a log (see damage above),
 * or undefined when the scan refuses the log.
 */
async function damage(p, id, bytes) {
  let stored;
  try {
    stored = await p.loadStored(id);
  } catch {
    return undefined;
  }
  if (stored === undefined) return undefined;
  const committed = stored.tornMarker?.truncateTo ?? bytes.length;
  const out = { storedEvents: stored.events.length, lineEvents: 0, droppedAfterDamage: 0 };
  let damaged = false;
  for (const { line, at } of completeLines(bytes)) {
    const n = recordEvents(line);
    out.lineEvents += n;
    if (at < committed) continue;
    if (damaged) out.droppedAfterDamage += n;
    damaged = true;
  }
  return out;
}

// The preset table of the harness's shipped composition (the base bundle's
// permission plugin, packages/bundle/base/cordis.patch.yml at
// dsh-v0.1.0-rc.8), whose names the permission-presets companion accepts in
// a permission/preset event; the package's own default table lacks
// read-only, which the harness's web snapshots select.
const SHIPPED_PRESETS = {
  'read-only': { sandbox: 'read-only', approval: 'ask' },
  'workspace-write': { sandbox: 'workspace-write', approval: 'ask' },
  'danger-full-access': { sandbox: 'danger-full-access', approval: 'never' },
};

/**
 * The package's permission-preset service over SHIPPED_PRESETS, in a
 * context of its own: the companion reads the table from it, and the
 * service's own session/created listener (which appends the initial
 * permission events to a fresh session) never sees the sessions the judge
 * replays. The service needs a confining shell, here a stand-in whose
 * sandboxMode is the shipped composition's default mode (workspace-write;
 * only the service's defaultPreset depends on it), and the approval service.
 */
async function shippedPresets() {
  const ctx = new Context();
  class Shell extends Service {
    sandboxMode = 'workspace-write';
    constructor(ctx) {
      super(ctx, 'shell');
    }
  }
  await ctx.plugin(SessionStore);
  await ctx.plugin(Shell);
  await ctx.plugin(ApprovalService, { policy: 'ask' });
  await ctx.plugin(PermissionPresetService, { presets: SHIPPED_PRESETS });
  for (let i = 0; i < 1000 && !ctx.permissionPresets; i++) await new Promise((r) => setTimeout(r, 0));
  const presets = ctx.permissionPresets;
  if (!presets) throw new Error('the permission-preset service did not start');
  if (presets.names.join() !== Object.keys(SHIPPED_PRESETS).join()) throw new Error(`the permission-preset service names ${presets.names.join()}`);
  return presets;
}

// The session store with the invariant service and the companions of the
// session, compaction and user-approval packages, as the harness's own tests
// mount them (packages/core/session/tests/invariant.spec.ts): each replays
// the events of a session when it is announced (session/created) and checks
// every event appended after. The companions' checks inject the sessions
// service, which the registry's context holds.
const invariantCtx = new Context();
await invariantCtx.plugin(SessionStore);
await invariantCtx.plugin(InvariantRegistry, { enabled: true });
invariantCtx.provide('permissionPresets', await shippedPresets());
await invariantCtx.plugin(SessionInvariant);
await invariantCtx.plugin(CompactionInvariant);
await invariantCtx.plugin(ApprovalInvariant);
if (!invariantCtx.sessions || !invariantCtx.invariants || !invariantCtx.permissionPresets) throw new Error('the invariant service did not start');

// The companions of the sandbox-policy and permission-presets packages check
// the events of the sessions in the store when they are installed, and every
// event appended after, but not a session announced later: a log is checked
// by installing them while its session is in the store (their dispose
// releases the registration). The permission-presets one injects the preset
// service too (shippedPresets, provided above under its service name).
const INSTALL_TIME = [SandboxPolicyInvariant, PermissionPresetsInvariant];

/** Installs and disposes a companion; returns the error its install throws. */
async function installCheck(companion) {
  const fiber = invariantCtx.plugin(companion);
  try {
    await fiber;
    return undefined;
  } catch (e) {
    return e;
  } finally {
    await fiber.dispose();
  }
}

// The checks run one log at a time: an install checks every session in the
// store.
let checking = Promise.resolve();

/**
 * Replays a loaded log through the harness's invariants the way a resume
 * seeds a live session with it (and, for INSTALL_TIME, as a session in the
 * store when they are installed), and returns the first error that throws.
 */
function invariantViolation(id, meta, events) {
  const run = checking.then(async () => {
    const sessions = invariantCtx.sessions;
    let detach;
    try {
      const session = sessions.prepare(id, {
        seed: events.map((event) => structuredClone(event)),
        meta: structuredClone(meta),
        seedSource: 'persistence',
      });
      detach = sessions.enter(session);
      sessions.announce(session);
      for (const companion of INSTALL_TIME) {
        const e = await installCheck(companion);
        if (e !== undefined) return e;
      }
      return undefined;
    } catch (e) {
      return e;
    } finally {
      detach?.();
    }
  });
  checking = run;
  return run;
}

// Each companion must be live: a log that breaks only its checks must be
// refused (a companion whose injection never resolved would pass anything).
for (const [pkg, events] of [
  ['@deepseek-ai/dsh-session', [{ type: 'turn/end', seq: 0, time: 0, data: { turn: 1, reason: { kind: 'completed' } } }]],
  ['@deepseek-ai/dsh-compaction', [{ type: 'compaction/end', seq: 0, time: 0, data: { compactionId: 'c', turn: null } }]],
  ['@deepseek-ai/dsh-user-approval', [{ type: 'approval/policy', seq: 0, time: 0, data: { policy: 'sometimes' } }]],
  ['@deepseek-ai/dsh-sandbox-policy', [{ type: 'sandbox/mode', seq: 0, time: 0, data: { mode: 'wide-open' } }]],
  ['@deepseek-ai/dsh-permission-presets', [{ type: 'permission/preset', seq: 0, time: 0, data: { preset: 'custom' } }]],
]) {
  const meta = { version: 0, id: '00000000-0000-4000-8000-000000000000', createdAt: 0, cwd: '/', delegationDepth: 0 };
  const e = await invariantViolation(meta.id, meta, events);
  if (e?.packageName !== pkg) throw new Error(`the invariants of ${pkg} are not live: ${String(e?.message ?? e)}`);
}
// A log that breaks none passes (the install-time companions' registrations
// are released between logs).
for (let i = 0; i < 2; i++) {
  const meta = { version: 0, id: '00000000-0000-4000-8000-000000000000', createdAt: 0, cwd: '/', delegationDepth: 0 };
  const e = await invariantViolation(meta.id, meta, [{ type: 'sandbox/mode', seq: 0, time: 0, data: { mode: 'read-only' } }, { type: 'permission/preset', seq: 1, time: 1, data: { preset: 'read-only' } }]);
  if (e !== undefined) throw new Error(`the invariants refuse a log that breaks none: ${String(e?.message ?? e)}`);
}

async function judge({ root, compression, id, plain, checkWriter, checkDamage }) {
  let bytes;
  if (plain !== undefined && (checkWriter === true || checkDamage === true)) {
    try {
      bytes = readFileSync(plain);
    } catch {
      bytes = undefined;
    }
  }
  const out = bytes !== undefined && checkWriter === true ? writerCheck(bytes) : { roundTripDiffers: false, stringifyThrows: false };
  const { p, close } = await openRoot(root, compression);
  try {
    if (bytes !== undefined && checkDamage === true && compression === 'none') out.damage = await damage(p, id, bytes);
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
    const violation = await invariantViolation(id, loaded.meta, loaded.events);
    if (violation !== undefined) {
      out.invariantError = String(violation?.message ?? violation);
      out.invariantErrorName = violation?.name ?? typeof violation;
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

/** One verdict as a line of output; without its events when they cannot be written. */
function encodeVerdict(v) {
  try {
    return JSON.stringify(v) + '\n';
  } catch (e) {
    const { events: _events, meta: _meta, ...rest } = v;
    return JSON.stringify({ ...rest, verdictError: String(e?.message ?? e) }) + '\n';
  }
}

// Up to CONCURRENCY sessions are judged at once (each in its own root and
// backend instance), so one's file I/O overlaps another's work; verdicts
// are written in input order.
const CONCURRENCY = 4;
const pending = [];
for await (const line of createInterface({ input: process.stdin, crlfDelay: Infinity })) {
  if (line === '') continue;
  pending.push(judge(JSON.parse(line)));
  while (pending.length >= CONCURRENCY) process.stdout.write(encodeVerdict(await pending.shift()));
}
while (pending.length > 0) process.stdout.write(encodeVerdict(await pending.shift()));
// Exit only once stdout is flushed: a pipe is written asynchronously.
process.stdout.write('', () => process.exit(0));
