package main

import (
	"context"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/sessionflow/sessionflow/client"
)

// forkInput is a validated `fork` command line.
type forkInput struct {
	parent, newID, cwd string
	atTurn             int64
	route              routeFlags
}

// validate checks the flags that do not need a server.
func (in *forkInput) validate() error {
	if err := requireID(in.parent); err != nil {
		return err
	}
	if in.newID == "" {
		return usageErrorf("--new-id is required: it names the new session")
	}
	if in.newID == in.parent {
		return usageErrorf("--new-id must name another session than --id")
	}
	if in.atTurn < 0 {
		return usageErrorf("--at-turn must be a turn (1 or more), got %d", in.atTurn)
	}
	if err := in.route.validate(); err != nil {
		return err
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

// request is the client's fork request of the command line.
func (in forkInput) request() client.ForkRequest {
	return client.ForkRequest{ParentID: in.parent, NewID: in.newID, AtTurn: in.atTurn, Cwd: in.cwd, AgentOptions: in.route.options()}
}

func newForkCmd(a *app) *cobra.Command {
	var in forkInput
	var asJSON bool
	var conn *connFlags
	cmd := &cobra.Command{
		Use:   "fork --id ID --new-id NEW [--at-turn N]",
		Short: "Fork a session at a turn into a new live session",
		Long: `Create the session NEW (a CreateSession workflow, workflow id session/<encoded NEW>)
whose log starts with the events of session ID through the end of its turn N
(its turn/end), then the session/end-seed marker {"inherited":true}, and wait
until it is live, then print it. Without --at-turn the fork copies through ID's
last completed turn. The new header records the lineage the harness writes:
parentSession ID, isSeeded (seedLength in format v0); it takes ID's cwd (unless
--cwd) and, without --provider and --model, the route the copied turns record.
ID is only read: live or stored, it is left as it is. A turn still running, or
one ID never started, is refused before anything is created. A fork of a fork
works the same way; starter log list shows each session's parent.` + lifecycleNote,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := in.validate(); err != nil {
				return err
			}
			return a.withClient(cmd, conn, func(ctx context.Context, c *client.Client) error {
				s, err := c.Fork(ctx, in.request(), conn.callOptions()...)
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
	fs.StringVar(&in.parent, "id", "", "the session to fork (required)")
	fs.StringVar(&in.newID, "new-id", "", "id of the new session (required)")
	fs.Int64Var(&in.atTurn, "at-turn", 0, "fork through the end of this turn (default: the last completed turn)")
	fs.StringVar(&in.cwd, "cwd", "", "working directory of the new session (default: the parent's)")
	fs.BoolVar(&asJSON, "json", false, "print the live session as JSON")
	in.route.add(fs)
	return cmd
}
