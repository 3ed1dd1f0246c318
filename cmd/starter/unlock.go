package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sessionflow/sessionflow/client"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/wire"
)

func newUnlockCmd(a *app) *cobra.Command {
	var id string
	var force bool
	sf := &storeFlags{}
	var conn *connFlags
	cmd := &cobra.Command{
		Use:   "unlock --id ID [--force]",
		Short: "Forfeit the write lease of a session whose owner is gone",
		Long: `Remove a session's write lease left behind by an owner that is gone, after
checking through Temporal that no execution of the owning workflow id is
running (looked up without a run id: continue-as-new changes it). The lease's
handle id is revoked, so the old owner can never write again; a session that
was created but never written is erased. A lease taken by a "log" command
cannot be checked through Temporal and needs --force.

--force skips the check and does not contact Temporal (as log unlock --force).
The store is --root DIR (env ` + envRoot + `) with --compression none|zstd (env
` + envCompression + `, default the root marker's encoding, else zstd).` + lifecycleNote,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := a.storeFor(sf, id)
			if err != nil {
				return err
			}
			if force {
				lease, err := st.ForceUnlock(cmd.Context(), id)
				if err != nil {
					return err
				}
				return a.printUnlocked(cmd.Context(), st, id, lease)
			}
			lease, err := st.LeaseOf(cmd.Context(), id)
			if errors.Is(err, wire.ErrCorrupt) {
				return fmt.Errorf("session %q: its lease cannot be read (%w), so Temporal cannot tell whether its owner is gone; once the owner is known to be gone, pass --force", id, err)
			}
			if err != nil {
				return err
			}
			if lease == nil {
				return a.printUnlocked(cmd.Context(), st, id, nil)
			}
			if lease.Owner.WorkflowID == cliWorkflowID {
				return fmt.Errorf("session %q is leased by a starter log command (host %q, pid %d), which Temporal cannot check; once that process is gone, pass --force",
					id, lease.Host, lease.PID)
			}
			return a.withClient(cmd, conn, func(ctx context.Context, c *client.Client) error {
				removed, err := c.Unlock(ctx, st, id)
				if err != nil {
					return err
				}
				return a.printUnlocked(ctx, st, id, removed)
			})
		},
	}
	conn = addConnFlags(cmd)
	cmd.Flags().StringVar(&id, "id", "", "session id (required)")
	cmd.Flags().BoolVar(&force, "force", false, "remove the lease without checking its owner through Temporal")
	sf.addRoot(cmd.Flags(), "store root directory (default $"+envRoot+")")
	return cmd
}

// printUnlocked reports a removed lease (nil: none was held). A session
// gone after its lease was removed was never written and has been erased
// (the lease alone cannot tell: it keeps the pending header it was created
// with).
func (a *app) printUnlocked(ctx context.Context, st *jsonl.Store, id string, lease *wire.Lease) error {
	if lease == nil {
		_, err := fmt.Fprintln(a.stdout, "no lease held")
		return err
	}
	fmt.Fprintf(a.stdout, "removed lease of session %q: %s\n", id, describeLease(lease))
	has, err := st.Has(ctx, id)
	if err != nil {
		return err
	}
	if !has {
		fmt.Fprintf(a.stdout, "session %q was never written; it was erased\n", id)
	}
	return nil
}
