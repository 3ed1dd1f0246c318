// Prices content and messages with the published token meter
// (@deepseek-ai/dsh-token-meter), for the differential test of sessionflow's
// estimate (testsuite/harness/estimate_test.go).
//
// Input (stdin): one JSON object per line, either
//   {"content": [block...]}  content blocks, priced alone and as the content
//                            of a user message
//   {"event": {...}}         a session event: its message is the one the
//                            harness derives from it (deriveEventMessage of
//                            @deepseek-ai/dsh-session: a user/message's data,
//                            an assistant/message's data.message unless its
//                            content is empty, a tool/result's data.message)
// Output (stdout): one JSON object per input line, in order:
//   {"content": n, "message": n}  estimateContent of the blocks and
//                                  estimateMessage of the message
//   {"content": null, "message": null}  an event that carries no message
//   {"error", "errorName"}         what the package throws on the input
//
// estimateMessage is the token meter service's own (ctx.tokenMeter, the
// package's main export, as the harness mounts it). estimateContent is not
// exported: it is taken from the package's lib/types/estimate.js, by path
// (the package's exports map does not name it), and the script stops with
// an error if that module's estimateMessage ever prices a message otherwise
// than the service does.
import { Context } from '@deepseek-ai/cordis';
import { deriveEventMessage } from '@deepseek-ai/dsh-session';
import TokenMeter from '@deepseek-ai/dsh-token-meter';
import { createInterface } from 'node:readline';
import * as Estimate from './node_modules/@deepseek-ai/dsh-token-meter/lib/types/estimate.js';

const ctx = new Context();
await ctx.plugin(TokenMeter);
for (let i = 0; i < 1000 && !ctx.tokenMeter; i++) await new Promise((r) => setTimeout(r, 0));
const meter = ctx.tokenMeter;
if (!meter) throw new Error('the token meter service did not start');

/** The module's and the service's estimateMessage disagree: the script stops. */
class CopiesDisagree extends Error {}

/** The prices of one input line. */
function price(input) {
  let message;
  if (Object.hasOwn(input, 'event')) {
    message = deriveEventMessage(input.event);
    if (message === null) return { content: null, message: null };
  } else {
    message = { role: 'user', content: input.content };
  }
  const out = { content: Estimate.estimateContent(message.content), message: meter.estimateMessage(message) };
  const again = Estimate.estimateMessage(message);
  if (again !== out.message) {
    throw new CopiesDisagree(`lib/types/estimate.js prices a message ${again}, the token meter service ${out.message}: ${JSON.stringify(message)}`);
  }
  return out;
}

for await (const line of createInterface({ input: process.stdin, crlfDelay: Infinity })) {
  if (line === '') continue;
  let out;
  try {
    out = price(JSON.parse(line));
  } catch (e) {
    if (e instanceof CopiesDisagree) throw e;
    out = { error: String(e?.message ?? e), errorName: e?.name ?? typeof e };
  }
  process.stdout.write(JSON.stringify(out) + '\n');
}
// Exit only once stdout is flushed: a pipe is written asynchronously.
process.stdout.write('', () => process.exit(0));
