package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sessionflow/sessionflow/client"
	"github.com/sessionflow/sessionflow/wire"
)

const approvalsNote = `

A session whose approval policy is ask (create, resume or chat with
--approval-policy ask, or starter permissions --approval-policy ask) stops
before each run_command and write_file call (and the worker's configured
tools) unless an allow rule matches it, and waits for a decision: starter
approve runs the call, starter reject gives the model a rejected result. A
sandbox escalation always asks. The running turn waits meanwhile (until
--approval-timeout, if set, rejects the call).`

func newApprovalsCmd(a *app) *cobra.Command {
	var id string
	var asJSON bool
	var conn *connFlags
	cmd := &cobra.Command{
		Use:   "approvals --id ID [--json]",
		Short: "List the tool calls of a live session waiting for approval",
		Long: `List the tool calls of live session ID's running turn that wait for a
decision: each call's id, tool, the reason it asks, its arguments (cut), the
sandbox mode an escalation asks for, and when it is rejected for want of a
decision. --json prints them as a JSON array of {"id", "callId", "tool",
"turn", "step", "reason", "arguments", "truncated", "escalation", "askedAtMs",
"deadlineMs"}.` + approvalsNote + lifecycleNote,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withID(cmd, conn, id, func(ctx context.Context, c *client.Client) error {
				st, err := c.LoopState(ctx, id)
				if err != nil {
					return err
				}
				if asJSON {
					return writeSafeJSON(a.stdout, nonNil(st.Approvals))
				}
				return renderApprovals(a.stdout, id, st, a.now())
			})
		},
	}
	conn = addConnFlags(cmd)
	cmd.Flags().StringVar(&id, "id", "", "session id (required)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the approvals as JSON")
	return cmd
}

// decideFlags are the flags of approve and reject.
type decideFlags struct {
	id, call string
	always   bool
	asJSON   bool
}

func newApproveCmd(a *app) *cobra.Command {
	var f decideFlags
	var conn *connFlags
	cmd := &cobra.Command{
		Use:   "approve --id ID [--call CALLID] [--always] [--json]",
		Short: "Let a tool call waiting for approval run",
		Long: `Allow the tool call CALLID of live session ID, which waits for approval, to
run once (the Decide update, outcome allowed-once). With a single call waiting
--call may be left out; with several, they are listed and the command refuses.
--always also adds an allow rule to the session, so that calls like it run
without asking from then on: for run_command, the commands starting with the
same first word and, unless it is a flag, second ("go test"); for write_file,
the paths under the same directory ("." for the working directory); for any
other tool, every call of it. An approval already decided (by an earlier
decision, its timeout or a cancel) is refused with the outcome that stands.
--json prints {"id", "callId", "outcome"}.` + approvalsNote + lifecycleNote,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withID(cmd, conn, f.id, func(ctx context.Context, c *client.Client) error {
				return decide(ctx, a, c, f, wire.OutcomeAllowedOnce)
			})
		},
	}
	conn = addConnFlags(cmd)
	f.add(cmd)
	cmd.Flags().BoolVar(&f.always, "always", false, "also allow calls like it from now on (an allow rule derived from the call)")
	return cmd
}

func newRejectCmd(a *app) *cobra.Command {
	var f decideFlags
	var conn *connFlags
	cmd := &cobra.Command{
		Use:   "reject --id ID [--call CALLID] [--json]",
		Short: "Refuse a tool call waiting for approval",
		Long: `Reject the tool call CALLID of live session ID, which waits for approval (the
Decide update, outcome rejected): the call does not run and the model gets a
result saying the user rejected it. With a single call waiting --call may be
left out; with several, they are listed and the command refuses. An approval
already decided is refused with the outcome that stands. --json prints {"id",
"callId", "outcome"}.` + approvalsNote + lifecycleNote,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withID(cmd, conn, f.id, func(ctx context.Context, c *client.Client) error {
				return decide(ctx, a, c, f, wire.OutcomeRejected)
			})
		},
	}
	conn = addConnFlags(cmd)
	f.add(cmd)
	return cmd
}

func (f *decideFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.id, "id", "", "session id (required)")
	cmd.Flags().StringVar(&f.call, "call", "", "id of the tool call to decide (required when several wait)")
	cmd.Flags().BoolVar(&f.asJSON, "json", false, "print the decision as JSON")
}

// decide sends the Decide of approve or reject.
func decide(ctx context.Context, a *app, c *client.Client, f decideFlags, outcome string) error {
	st, err := c.LoopState(ctx, f.id)
	if err != nil {
		return err
	}
	pending, err := chooseApproval(a.stdout, f.id, f.call, st)
	if err != nil {
		return err
	}
	req := wire.DecideRequest{CallID: f.call, Outcome: outcome}
	if pending != nil {
		req.ID, req.CallID = pending.ID, pending.CallID
	}
	if f.always {
		if pending == nil {
			return fmt.Errorf("call %s of session %q waits for no approval: --always derives its rule from a pending call (starter approvals lists them)", displayText(f.call), f.id)
		}
		rule, err := deriveRule(*pending)
		if err != nil {
			return fmt.Errorf("--always: %w; approve without it, or add a rule with starter permissions", err)
		}
		req.Remember = &rule
	}
	res, err := c.Decide(ctx, f.id, req)
	if err != nil {
		return err
	}
	if f.asJSON {
		return writeSafeJSON(a.stdout, res)
	}
	_, err = fmt.Fprintln(a.stdout, decisionText(res, pending, req.Remember))
	return err
}

// chooseApproval picks the approval a decision is about: the one of call
// when it is pending (nil when it is not: the session then says why), or
// the only one pending. Several pending and no call are listed on w and
// refused (the error on stderr says why).
func chooseApproval(w io.Writer, id, call string, st wire.LoopState) (*wire.PendingApproval, error) {
	if call != "" {
		if i := slices.IndexFunc(st.Approvals, func(p wire.PendingApproval) bool { return p.CallID == call }); i >= 0 {
			return &st.Approvals[i], nil
		}
		return nil, nil
	}
	switch len(st.Approvals) {
	case 0:
		return nil, fmt.Errorf("session %q has no tool call waiting for approval", id)
	case 1:
		return &st.Approvals[0], nil
	}
	fmt.Fprintf(w, "%d tool calls of session %q wait for approval:\n", len(st.Approvals), id)
	for _, p := range st.Approvals {
		fmt.Fprintf(w, "  --call %s  %s %s\n", displayText(p.CallID), displayText(p.Tool), termText(clip(argsLine(p.Arguments), maxArgsShown), false))
	}
	return nil, fmt.Errorf("%d tool calls of session %q wait for approval: name one with --call", len(st.Approvals), id)
}

// decisionText says what a decision did.
func decisionText(res wire.DecideResult, p *wire.PendingApproval, rule *wire.ApprovalRule) string {
	call := "call " + displayText(res.CallID)
	if p != nil {
		call += " (" + displayText(p.Tool) + ")"
	}
	switch {
	case res.Outcome == wire.OutcomeRejected:
		return "rejected " + call
	case res.Outcome != wire.OutcomeAllowedOnce:
		return call + ": " + termText(res.Outcome, false)
	case rule != nil:
		return "allowed " + call + "; from now on allowed without asking: " + ruleText(*rule)
	}
	return "allowed " + call + " once"
}

// renderApprovals lists a session's pending approvals, now being the
// time their ages and deadlines are told against.
func renderApprovals(w io.Writer, id string, st wire.LoopState, now time.Time) error {
	if len(st.Approvals) == 0 {
		note := ""
		if st.Permissions != nil && st.Permissions.ApprovalPolicy == wire.ApprovalNever {
			note = " (its approval policy is never: no call waits)"
		}
		_, err := fmt.Fprintf(w, "no tool call of session %q waits for approval%s\n", id, note)
		return err
	}
	for _, p := range st.Approvals {
		fmt.Fprintf(w, "call %s (%s)", displayText(p.CallID), displayText(p.Tool))
		if p.Reason != "" {
			fmt.Fprintf(w, ": %s", termText(p.Reason, false))
		}
		fmt.Fprintln(w)
		args := clip(argsLine(p.Arguments), maxTextShown)
		if p.Truncated {
			args += " (cut)"
		}
		fmt.Fprintf(w, "  arguments: %s\n", termText(args, false))
		if p.Escalation != "" {
			fmt.Fprintf(w, "  escalation: to run under %s\n", displayText(p.Escalation))
		}
		fmt.Fprintf(w, "  %s\n", approvalTimes(p, now))
	}
	_, err := fmt.Fprintf(w, "decide with: starter approve --id %s --call CALLID [--always], or starter reject --id %s --call CALLID\n", displayText(id), displayText(id))
	return err
}

// approvalTimes says how long ago an approval was asked and when it is
// rejected for want of a decision.
func approvalTimes(p wire.PendingApproval, now time.Time) string {
	s := "asked " + ago(now.Sub(time.UnixMilli(p.AskedAtMs))) + " ago"
	if p.DeadlineMs > 0 {
		left := time.UnixMilli(p.DeadlineMs).Sub(now)
		if left < 0 {
			left = 0
		}
		s += "; rejected in " + ago(left) + " unless decided"
	}
	return s
}

// ago renders a duration to the second.
func ago(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	return d.Round(time.Second).String()
}

func newPermissionsCmd(a *app) *cobra.Command {
	var in permissionsInput
	var asJSON bool
	var conn *connFlags
	cmd := &cobra.Command{
		Use:   "permissions --id ID [--preset P] [--sandbox-mode M] [--approval-policy ask|never] [--network on|off] [--allow-command PREFIX]... [--allow-path DIR]... [--allow-tool NAME]... [--clear-rules] [--approval-timeout D]",
		Short: "Show or change a live session's sandbox and approval permissions",
		Long: `Print the permissions in effect in live session ID: its sandbox mode, network
access, approval policy, permission preset, allow rules and approval timeout.
With any other flag, change them first, between turns (the SetPermissions
update; refused while a turn runs): --preset sets the sandbox mode and the
approval policy of its bundle (read-only: read-only and ask; workspace-write:
workspace-write and ask; danger-full-access: danger-full-access and never),
--sandbox-mode and
--approval-policy set one (with --preset they must agree with it), --network
on|off the network access. --allow-command "go test" lets run_command run the
commands starting with those words without asking, --allow-path src lets
write_file write under src, --allow-tool NAME every call of a tool; each adds
to the rules in effect, after --clear-rules removes them all.
--approval-timeout 1h rejects an approval not decided within an hour (0: no
timeout). --json prints {"sandboxMode", "networkAccess", "approvalPolicy",
"preset", "rules": [{"tool", "commandPrefix", "pathPrefix"}],
"approvalTimeoutMs"}.` + approvalsNote + lifecycleNote,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireID(in.id); err != nil {
				return err
			}
			if err := in.parse(cmd); err != nil {
				return err
			}
			return a.withClient(cmd, conn, func(ctx context.Context, c *client.Client) error {
				st, err := c.LoopState(ctx, in.id)
				if err != nil {
					return err
				}
				perms := st.Permissions
				if in.changes() {
					req, err := in.request(st.Permissions)
					if err != nil {
						return err
					}
					p, err := c.SetPermissions(ctx, in.id, req)
					if err != nil {
						return err
					}
					perms = &p
				}
				if perms == nil {
					return fmt.Errorf("session %q reports no permissions: its worker predates approvals", in.id)
				}
				return printResult(a, asJSON, *perms, renderPermissions)
			})
		},
	}
	conn = addConnFlags(cmd)
	fs := cmd.Flags()
	fs.StringVar(&in.id, "id", "", "session id (required)")
	fs.StringVar(&in.preset, "preset", "", "permission preset: read-only, workspace-write or danger-full-access")
	fs.StringVar(&in.sandboxMode, "sandbox-mode", "", "sandbox mode: read-only, workspace-write or danger-full-access")
	fs.StringVar(&in.policy, "approval-policy", "", "approval policy: ask or never")
	fs.StringVar(&in.network, "network", "", "network access of the session's commands: on or off")
	fs.StringArrayVar(&in.commands, "allow-command", nil, `allow the run_command commands starting with these words without asking (e.g. "go test"); repeatable`)
	fs.StringArrayVar(&in.paths, "allow-path", nil, "allow write_file under this directory, relative to the working directory, without asking; repeatable")
	fs.StringArrayVar(&in.tools, "allow-tool", nil, "allow every call of this tool without asking; repeatable")
	fs.BoolVar(&in.clearRules, "clear-rules", false, "remove the allow rules in effect (before the --allow-* flags add theirs)")
	fs.DurationVar(&in.timeout, "approval-timeout", 0, "reject an approval not decided within this duration, e.g. 1h; 0 removes the timeout")
	fs.BoolVar(&asJSON, "json", false, "print the permissions as JSON")
	return cmd
}

// permissionsInput is a `permissions` command line.
type permissionsInput struct {
	id, preset, sandboxMode, policy, network string
	commands, paths, tools                   []string
	clearRules                               bool
	timeout                                  time.Duration
	timeoutSet                               bool
	// rules are the rules the --allow-* flags add, in order.
	rules []wire.ApprovalRule
}

// parse checks the flags that need no server.
func (in *permissionsInput) parse(cmd *cobra.Command) error {
	if in.preset != "" {
		if _, _, ok := wire.PresetBundle(in.preset); !ok {
			return usageErrorf("--preset must be %q, %q or %q, got %q", wire.PresetReadOnly, wire.PresetWorkspaceWrite, wire.PresetDangerFullAccess, in.preset)
		}
	}
	if in.sandboxMode != "" && !slices.Contains(wire.SandboxModes, in.sandboxMode) {
		return usageErrorf("--sandbox-mode must be %q, %q or %q, got %q", wire.SandboxReadOnly, wire.SandboxWorkspaceWrite, wire.SandboxDangerFullAccess, in.sandboxMode)
	}
	if err := checkApprovalPolicy(in.policy); err != nil {
		return err
	}
	if in.network != "" && in.network != "on" && in.network != "off" {
		return usageErrorf(`--network must be "on" or "off", got %q`, in.network)
	}
	in.timeoutSet = cmd.Flags().Changed("approval-timeout")
	if in.timeoutSet {
		if err := checkApprovalTimeout(in.timeout, true); err != nil {
			return err
		}
	}
	in.rules = nil
	for _, c := range in.commands {
		r, err := commandRule(c)
		if err != nil {
			return err
		}
		in.rules = append(in.rules, r)
	}
	for _, p := range in.paths {
		r, err := pathRule(p)
		if err != nil {
			return err
		}
		in.rules = append(in.rules, r)
	}
	for _, t := range in.tools {
		if strings.TrimSpace(t) == "" {
			return usageErrorf("--allow-tool needs a tool name")
		}
		in.rules = append(in.rules, wire.ApprovalRule{Tool: t})
	}
	return nil
}

// changes reports whether the command line changes anything.
func (in *permissionsInput) changes() bool {
	return in.preset != "" || in.sandboxMode != "" || in.policy != "" || in.network != "" ||
		len(in.rules) > 0 || in.clearRules || in.timeoutSet
}

// request builds the SetPermissions request; current are the permissions
// in effect, whose rules the --allow-* flags add to (none after
// --clear-rules).
func (in *permissionsInput) request(current *wire.Permissions) (wire.SetPermissionsRequest, error) {
	req := wire.SetPermissionsRequest{Preset: in.preset, SandboxMode: in.sandboxMode, ApprovalPolicy: in.policy}
	if in.network != "" {
		on := in.network == "on"
		req.NetworkAccess = &on
	}
	if in.timeoutSet {
		ms := in.timeout.Milliseconds()
		req.ApprovalTimeoutMs = &ms
	}
	if len(in.rules) > 0 || in.clearRules {
		rules := []wire.ApprovalRule{}
		if !in.clearRules && current != nil {
			rules = append(rules, current.Rules...)
		}
		for _, r := range in.rules {
			if !slices.Contains(rules, r) {
				rules = append(rules, r)
			}
		}
		if len(rules) > wire.MaxApprovalRules {
			return req, fmt.Errorf("session %q would have %d allow rules, more than %d: remove some with --clear-rules", in.id, len(rules), wire.MaxApprovalRules)
		}
		req.Rules = &rules
	}
	return req, nil
}

// renderPermissions writes a session's permissions as aligned text.
func renderPermissions(w io.Writer, p wire.Permissions) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	network := "off"
	if p.NetworkAccess {
		network = "on"
	}
	timeout := "none (an approval waits until decided)"
	if p.ApprovalTimeoutMs > 0 {
		timeout = (time.Duration(p.ApprovalTimeoutMs) * time.Millisecond).String()
	}
	fmt.Fprintf(tw, "sandbox mode\t%s\n", displayText(orDash(p.SandboxMode)))
	fmt.Fprintf(tw, "network\t%s\n", network)
	fmt.Fprintf(tw, "approval policy\t%s\n", displayText(orDash(p.ApprovalPolicy)))
	fmt.Fprintf(tw, "preset\t%s\n", displayText(orDash(p.Preset)))
	fmt.Fprintf(tw, "approval timeout\t%s\n", timeout)
	if len(p.Rules) == 0 {
		fmt.Fprintf(tw, "allow rules\tnone\n")
	}
	for i, r := range p.Rules {
		label := ""
		if i == 0 {
			label = "allow rules"
		}
		fmt.Fprintf(tw, "%s\t%s\n", label, ruleText(r))
	}
	return tw.Flush()
}

// writeSafeJSON writes v as indented JSON made safe for a terminal
// (termJSON: it may quote a model's arguments).
func writeSafeJSON(w io.Writer, v any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, termJSON(bytes.TrimSuffix(b.Bytes(), []byte("\n"))), "", "  "); err != nil {
		return err
	}
	out.WriteByte('\n')
	_, err := w.Write(out.Bytes())
	return err
}

// nonNil is s, or an empty slice for nil (JSON [] rather than null).
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
