// Renders the runtime-context snapshot of sessions with the published
// packages, for the runtime-context differential test
// (testsuite/harness/runtimecontext_diff_test.go).
//
// Input (stdin): one JSON object per line, {"sandboxMode", "approvalPolicy",
// "cwd"}: a session whose log records that sandbox/mode and approval/policy
// and whose header has that cwd.
// Output (stdout): one JSON object per input line, in order:
//   {"text", "sections": [{"name", "text"}]}
// the snapshot the harness's agent loop stores before a model request
// (joinContextSections over renderContextSections of the systemPrompt
// assembly), with the contexts the harness's own services register:
// SandboxPolicyService of @deepseek-ai/dsh-sandbox-policy (sandbox:policy)
// and ApprovalService of @deepseek-ai/dsh-user-approval (approval:policy),
// over SystemPrompt of @deepseek-ai/dsh-system-prompt; or {"error"}.
import { Context } from '@deepseek-ai/cordis';
import { SystemPrompt, renderContextSections, joinContextSections } from '@deepseek-ai/dsh-system-prompt';
import { SandboxPolicyService } from '@deepseek-ai/dsh-sandbox-policy';
import { ApprovalService } from '@deepseek-ai/dsh-user-approval';
import { createInterface } from 'node:readline';

const ctx = new Context();
await ctx.plugin(SystemPrompt, {});
// The deployment defaults never apply: each session's log sets both knobs.
await ctx.plugin(SandboxPolicyService, { mode: 'read-only', workspaceRoot: '/' });
await ctx.plugin(ApprovalService, { policy: 'ask' });
for (let i = 0; i < 100 && ctx.get('systemPrompt') === undefined; i++) await new Promise((r) => setTimeout(r, 10));

for await (const line of createInterface({ input: process.stdin, crlfDelay: Infinity })) {
  if (line === '') continue;
  let out;
  try {
    const { sandboxMode, approvalPolicy, cwd } = JSON.parse(line);
    const session = {
      id: 's', header: { cwd },
      events: [
        { type: 'sandbox/mode', seq: 0, data: { mode: sandboxMode } },
        { type: 'approval/policy', seq: 1, data: { policy: approvalPolicy } },
      ],
    };
    const sections = renderContextSections(await ctx.systemPrompt.assemble({ agent: { session } }));
    out = { text: joinContextSections(sections), sections };
  } catch (e) {
    out = { error: String(e?.stack ?? e) };
  }
  process.stdout.write(JSON.stringify(out) + '\n');
}
process.exit(0);
