// Switches the approval policy of sessions with the published
// @deepseek-ai/dsh-user-approval, for the policy-notice differential test
// (testsuite/harness/policynotice_diff_test.go).
//
// Input (stdin): one JSON object per line, {"previous", "policy"}: a session
// whose log's last approval/policy is previous, switched to policy by the
// user (ApprovalService.setPolicy, the /permission command's writer).
// Output (stdout): one JSON object per input line, in order:
//   {"appended": [{"type", "data"}], "injected": [message]}
// the events setPolicy appends to the session and the messages it injects
// into the agent (Agent.inject: the next step's input, waking nothing); or
// {"error"}.
import { Context } from '@deepseek-ai/cordis';
import { SystemPrompt } from '@deepseek-ai/dsh-system-prompt';
import { ApprovalService } from '@deepseek-ai/dsh-user-approval';
import { createInterface } from 'node:readline';

const ctx = new Context();
await ctx.plugin(SystemPrompt, {});
await ctx.plugin(ApprovalService, {});
for (let i = 0; i < 100 && ctx.get('approval') === undefined; i++) await new Promise((r) => setTimeout(r, 10));

for await (const line of createInterface({ input: process.stdin, crlfDelay: Infinity })) {
  if (line === '') continue;
  let out;
  try {
    const { previous, policy } = JSON.parse(line);
    const appended = [];
    const injected = [];
    const session = {
      id: 's', header: {},
      events: [{ type: 'approval/policy', seq: 0, data: { policy: previous } }],
      append(type, data) {
        appended.push({ type, data });
        this.events.push({ type, seq: this.events.length, data });
      },
    };
    ctx.approval.setPolicy({ session, inject: (m) => injected.push(m) }, policy);
    out = { appended, injected };
  } catch (e) {
    out = { error: String(e?.stack ?? e) };
  }
  process.stdout.write(JSON.stringify(out) + '\n');
}
process.exit(0);
