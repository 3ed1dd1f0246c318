package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sessionflow/sessionflow/client"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// createInput is a validated `create` command line.
type createInput struct {
	id, cwd, parent, seedFile string
	forkThrough               int64
	fork                      bool
	route                     routeFlags
}

// routeFlags are the agent's options of the command line: its model route
// (--provider, --model), its sandbox (--sandbox-mode, --network), its
// approvals (--approval-policy, --approval-timeout) and its permission
// preset (--preset).
type routeFlags struct {
	provider, model, sandboxMode string
	network                      bool
	approvalPolicy, preset       string
	approvalTimeout              time.Duration
}

// options returns the agent options of the flags, nil when none is set.
func (r routeFlags) options() *wire.AgentOptions {
	if r == (routeFlags{}) {
		return nil
	}
	o := &wire.AgentOptions{Provider: r.provider, Model: r.model, SandboxMode: r.sandboxMode, NetworkAccess: r.network,
		ApprovalPolicy: r.approvalPolicy, Preset: r.preset}
	if r.approvalTimeout > 0 {
		ms := float64(r.approvalTimeout.Milliseconds())
		o.ApprovalTimeoutMs = &ms
	}
	return o
}

// validate checks the approval flags (the worker checks the others).
func (r routeFlags) validate() error {
	if err := checkApprovalPolicy(r.approvalPolicy); err != nil {
		return err
	}
	if r.preset != "" {
		m, a, ok := wire.PresetBundle(r.preset)
		if !ok {
			return usageErrorf("--preset must be %q, %q or %q, got %q", wire.PresetReadOnly, wire.PresetWorkspaceWrite, wire.PresetDangerFullAccess, r.preset)
		}
		if (r.sandboxMode != "" && r.sandboxMode != m) || (r.approvalPolicy != "" && r.approvalPolicy != a) {
			return usageErrorf("--preset %s is --sandbox-mode %s --approval-policy %s; the flags set disagree", r.preset, m, a)
		}
	}
	if r.approvalTimeout != 0 {
		return checkApprovalTimeout(r.approvalTimeout, false)
	}
	return nil
}

func (r *routeFlags) add(fs *pflag.FlagSet) {
	fs.StringVar(&r.provider, "provider", "", "the agent's model provider (as the worker offers it, e.g. scripted), for turns (starter turn)")
	fs.StringVar(&r.model, "model", "", "the agent's model, for turns")
	fs.StringVar(&r.sandboxMode, "sandbox-mode", "", "what the agent's commands and file tools may write: read-only, workspace-write (the default) or danger-full-access (unconfined)")
	fs.BoolVar(&r.network, "network", false, "let the agent's commands use TCP in the confined sandbox modes")
	fs.StringVar(&r.approvalPolicy, "approval-policy", "", "ask: run_command, write_file and the configured tools wait for your approval (starter approve, reject); never (the default): nothing waits")
	fs.StringVar(&r.preset, "preset", "", "permission preset, a sandbox mode and an approval policy: read-only (read-only, ask), workspace-write (workspace-write, ask) or danger-full-access (danger-full-access, never)")
	fs.DurationVar(&r.approvalTimeout, "approval-timeout", 0, "reject an approval not decided within this duration, e.g. 1h (default: wait)")
}

// request builds the CreateSession request; the seed file is read here.
func (in createInput) request() (wire.CreateSessionRequest, error) {
	req := wire.CreateSessionRequest{SessionID: in.id, Meta: &wire.SessionMeta{Cwd: in.cwd, ParentSession: in.parent}, AgentOptions: in.route.options()}
	if in.fork {
		req.Fork = &wire.ForkSeed{ParentSessionID: in.parent, Count: in.forkThrough + 1}
		req.Meta.IsSeeded = true
		req.InheritedEventCount = req.Fork.Count
	}
	if in.seedFile != "" {
		seed, err := readSeed(in.seedFile)
		if err != nil {
			return req, err
		}
		req.Seed = session.WireEvents(seed)
		if in.parent != "" && len(seed) > 0 {
			req.Meta.IsSeeded = true
			req.InheritedEventCount = int64(len(seed))
		}
		if err := checkSeed(seed, req.Meta.IsSeeded); err != nil {
			return req, usageErrorf("--seed %s: %w", in.seedFile, err)
		}
	}
	return req, nil
}

// checkSeed applies to a seed, followed by the end-seed marker the create
// stores after it, the rules the store applies at append, so a seed that
// would be refused is refused before anything reaches Temporal.
func checkSeed(seed []session.Event, seeded bool) error {
	suffix := session.CloneEvents(seed)
	if marker, due := session.EndSeedMarker(seed, seeded, session.EndSeedTime(seed, 0)); due {
		suffix = append(suffix, marker)
	}
	return session.CheckAppendable(wire.Header{IsSeeded: seeded}, 0, suffix)
}

// validate checks the flags that do not need a server.
func (in *createInput) validate(fs *pflag.FlagSet) error {
	if err := requireID(in.id); err != nil {
		return err
	}
	if err := in.route.validate(); err != nil {
		return err
	}
	in.fork = fs.Changed("fork-through")
	if in.fork {
		if in.parent == "" {
			return usageErrorf("--fork-through needs --parent: it names the session to fork")
		}
		if in.forkThrough < 0 {
			return usageErrorf("--fork-through must be a seq (0 or more), got %d", in.forkThrough)
		}
		if in.seedFile != "" {
			return usageErrorf("--seed and --fork-through are mutually exclusive")
		}
	}
	if in.parent == in.id {
		return usageErrorf("--parent must name another session than --id")
	}
	if in.cwd != "" {
		abs, err := filepath.Abs(in.cwd)
		if err != nil {
			return usageErrorf("--cwd: %w", err)
		}
		in.cwd = abs
	}
	return nil
}

// readSeed reads a JSONL seed file: the events of the new session from seq 0.
func readSeed(path string) ([]session.Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, usageErrorf("--seed: %w", err)
	}
	defer f.Close()
	seed := []session.Event{}
	br := bufio.NewReader(f)
	for lineNo := 1; ; lineNo++ {
		line, rerr := br.ReadBytes('\n')
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			return nil, fmt.Errorf("--seed %s: %w", path, rerr)
		}
		if trimmed := bytes.TrimSpace(line); len(trimmed) > 0 {
			e, _, err := session.ParseAppendLine(trimmed)
			if err != nil {
				return nil, usageErrorf("--seed %s line %d: %w", path, lineNo, err)
			}
			seed = append(seed, e)
		}
		if rerr != nil {
			return seed, nil
		}
	}
}

func newCreateCmd(a *app) *cobra.Command {
	var in createInput
	var asJSON bool
	var conn *connFlags
	cmd := &cobra.Command{
		Use:   "create --id ID [--cwd DIR] [--parent ID [--fork-through N]] [--seed FILE]",
		Short: "Create a session through Temporal and wait until it is live",
		Long: `Start a CreateSession workflow (workflow id session/<encoded ID>) and wait until the
session is live, then print it. A running workflow of the same id, or a stored
session of that id, fails with: session "<ID>" already exists.

--cwd records the working directory (a relative path is resolved against the
current directory). --parent records the session's parent. --fork-through N
forks the parent: the new session starts with a copy of the parent's events
with seqs 0..N (N+1 events), copied by the worker from the store. --seed FILE
instead gives the first events inline, as JSONL from seq 0 (bounded by the
batch limit); with --parent they are the inherited prefix.` + lifecycleNote,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := in.validate(cmd.Flags()); err != nil {
				return err
			}
			req, err := in.request()
			if err != nil {
				return err
			}
			return a.withClient(cmd, conn, func(ctx context.Context, c *client.Client) error {
				s, err := c.Create(ctx, req, conn.callOptions()...)
				if err != nil {
					return err
				}
				return printResult(a, asJSON, s, renderSession)
			})
		},
	}
	conn = addConnFlags(cmd)
	conn.addOnShard()
	fs := cmd.Flags()
	fs.StringVar(&in.id, "id", "", "session id (required)")
	fs.StringVar(&in.cwd, "cwd", "", "working directory of the session")
	fs.StringVar(&in.parent, "parent", "", "id of the parent session")
	fs.Int64Var(&in.forkThrough, "fork-through", 0, "fork the parent through this seq (needs --parent)")
	fs.StringVar(&in.seedFile, "seed", "", "JSONL file of the first events")
	fs.BoolVar(&asJSON, "json", false, "print the live session as JSON")
	in.route.add(fs)
	return cmd
}

func newResumeCmd(a *app) *cobra.Command {
	var id string
	var route routeFlags
	var asJSON, keepDeadOwner bool
	var conn *connFlags
	cmd := &cobra.Command{
		Use:   "resume --id ID",
		Short: "Resume a stored session through Temporal and wait until it is live",
		Long: `Start a ResumeSession workflow (workflow id session/<encoded ID>) for a stored session
and wait until it is live, then print it. The workflow takes the session's
write lease, repairs a crashed tail (the interrupted turn is closed) and
continues the log. A running workflow of the same id fails with: session
"<ID>" already exists. A lease still held by an owner Temporal reports closed
(a terminated or timed-out workflow) is forfeited and the resume goes on;
--keep-dead-owner refuses with "already owned" instead (see unlock).` + lifecycleNote,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := route.validate(); err != nil {
				return err
			}
			return a.withID(cmd, conn, id, func(ctx context.Context, c *client.Client) error {
				line := startElapsed(a.stderr, isTerminal(a.stderr), fmt.Sprintf("resuming %q (reading and repairing its log)", id), elapsedDelay, time.Second)
				req := wire.ResumeSessionRequest{AgentOptions: route.options()}
				if keepDeadOwner {
					forfeit := false
					req.ForfeitDeadOwner = &forfeit
				}
				s, err := c.Resume(ctx, id, req, conn.callOptions()...)
				line.stopElapsed()
				if err != nil {
					return err
				}
				return printResult(a, asJSON, s, renderSession)
			})
		},
	}
	conn = addConnFlags(cmd)
	conn.addOnShard()
	cmd.Flags().StringVar(&id, "id", "", "session id (required)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the live session as JSON")
	cmd.Flags().BoolVar(&keepDeadOwner, "keep-dead-owner", false, "refuse instead of forfeiting the lease of an owner Temporal reports closed")
	route.add(cmd.Flags())
	return cmd
}

// renderSession writes a live session as aligned text.
func renderSession(w io.Writer, s *client.Session) error {
	fmt.Fprintf(w, "session %q is live\n", s.SessionID)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  workflow\t%s (run %s)\n", displayText(s.WorkflowID), s.RunID)
	fmt.Fprintf(tw, "  source\t%s\n", s.Source)
	fmt.Fprintf(tw, "  handle\t%s\n", s.Handle.HandleID)
	fmt.Fprintf(tw, "  cwd\t%s\n", displayText(orDash(s.Header.Cwd)))
	if s.Header.ParentSession != "" {
		fmt.Fprintf(tw, "  parent\t%s\n", displayText(s.Header.ParentSession))
	}
	fmt.Fprintf(tw, "  next seq\t%d\n", s.NextSeq)
	fmt.Fprintf(tw, "  first live seq\t%d\n", s.FirstLiveSeq)
	fmt.Fprintf(tw, "  last turn\t%d\n", s.LastTurn)
	return tw.Flush()
}

// orDash renders an empty string as "-".
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
