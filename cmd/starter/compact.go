package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/sessionflow/sessionflow/client"
	"github.com/sessionflow/sessionflow/wire"
)

func newCompactCmd(a *app) *cobra.Command {
	var id, commandID string
	var asJSON bool
	var conn *connFlags
	cmd := &cobra.Command{
		Use:   "compact --id ID [--command-id C] [--json]",
		Short: "Compact a live session's conversation between turns",
		Long: `Compact the conversation of live session ID through its Compact update: the
earlier part of the conversation is summarised by the session's model (its
route must be set) and the summary replaces it in what the model sees next;
the log keeps every event and records the compaction (command/run,
compaction/start, compaction/summary, the replacing user/message,
compaction/end, command/done). Sent while a turn runs, the compaction waits for
the turn's end and runs before the next turn. The command prints what the
log's command/done says ("Compacted N history items (~T tokens).", "No
compactable history yet.", ...); a compaction that failed or was cancelled
(starter chat's Ctrl-C, the Cancel update) exits with status 1 and its error.
--command-id names the command/run and command/done pair (default: the
update's id). --json prints the result as JSON: {"commandId", "compacted",
"compactionId", "shadowed", "shadowedTokens", "pruned", "tokens", "window",
"text", "error"}.` + lifecycleNote,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withID(cmd, conn, id, func(ctx context.Context, c *client.Client) error {
				res, err := c.Compact(ctx, id, wire.CompactRequest{CommandID: commandID})
				if err != nil {
					return err
				}
				if err := printResult(a, asJSON, res, renderCompact); err != nil {
					return err
				}
				return compactError(id, res)
			})
		},
	}
	conn = addConnFlags(cmd)
	cmd.Flags().StringVar(&id, "id", "", "session id (required)")
	cmd.Flags().StringVar(&commandID, "command-id", "", "id of the command/run recording the compaction (default: the update's id)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}

// renderCompact writes a compaction's text, what its command/done says.
func renderCompact(w io.Writer, res wire.CompactResult) error {
	if res.Text == "" {
		return nil
	}
	_, err := fmt.Fprintln(w, termText(res.Text, false))
	return err
}

// errCompactionFailed is the class of a compaction that ran and failed.
var errCompactionFailed = errors.New("compaction failed")

// compactError is the error of a compaction whose result reports one, nil
// otherwise.
func compactError(id string, res wire.CompactResult) error {
	if res.Error == "" {
		return nil
	}
	return fmt.Errorf("%w: session %q: %s", errCompactionFailed, id, res.Error)
}
