package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/sessionflow/sessionflow/client"
	"github.com/sessionflow/sessionflow/wire"
)

func newHistoryCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "history",
		Short: "Export workflow histories",
		Long:  "Export workflow histories as JSON, for replay fixtures.",
		Args:  cobra.ArbitraryArgs,
		RunE:  groupRunE,
	}
	cmd.AddCommand(newHistoryExportCmd(a))
	return cmd
}

func newHistoryExportCmd(a *app) *cobra.Command {
	var id, workflowID, runID, out string
	var conn *connFlags
	cmd := &cobra.Command{
		Use:   "export --id ID --out FILE [--run-id RUNID]",
		Short: "Export a session workflow's history as JSON",
		Long: `Write the history of the session's workflow (session/<ID>), or of any
--workflow-id (a loop's: loop/<LOOPID>), as JSON in the format
worker.NewWorkflowReplayer().ReplayWorkflowHistoryFromJSONFile reads, for
replay fixtures. The latest run unless
--run-id is given (continue-as-new makes one history per run). --out - writes
to stdout; a file is written whole or not at all.` + lifecycleNote,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case id == "" && workflowID == "":
				return usageErrorf("--id or --workflow-id is required")
			case id != "" && workflowID != "":
				return usageErrorf("--id and --workflow-id are mutually exclusive")
			case out == "":
				return usageErrorf("--out is required (- for stdout)")
			}
			if id != "" {
				workflowID = wire.WorkflowID(id)
			}
			return a.withClient(cmd, conn, func(ctx context.Context, c *client.Client) error {
				if out == "-" {
					_, err := c.ExportWorkflowHistory(ctx, workflowID, runID, a.stdout)
					return err
				}
				n, err := exportToFile(ctx, c, workflowID, runID, out)
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(a.stdout, "exported %d events of workflow %s to %s\n", n, workflowID, out)
				return err
			})
		},
	}
	conn = addConnFlags(cmd)
	cmd.Flags().StringVar(&id, "id", "", "session id")
	cmd.Flags().StringVar(&workflowID, "workflow-id", "", "workflow id, instead of --id")
	cmd.Flags().StringVar(&runID, "run-id", "", "run id (default: the latest run)")
	cmd.Flags().StringVar(&out, "out", "", "output file, - for stdout (required)")
	return cmd
}

// exportToFile writes the history to a temporary file beside path and
// renames it into place once complete.
func exportToFile(ctx context.Context, c *client.Client, workflowID, runID, path string) (int, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return 0, fmt.Errorf("--out: %w", err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename there is nothing left to remove
	n, err := c.ExportWorkflowHistory(ctx, workflowID, runID, tmp)
	if cerr := tmp.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("--out: %w", cerr)
	}
	if err != nil {
		return 0, err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return 0, fmt.Errorf("--out: %w", err)
	}
	return n, nil
}
