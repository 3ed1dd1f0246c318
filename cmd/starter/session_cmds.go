package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/sessionflow/sessionflow/client"
	"github.com/sessionflow/sessionflow/wire"
)

func newAppendCmd(a *app) *cobra.Command {
	var id string
	var maxBytes, maxEvents int
	var atEnd bool
	var conn *connFlags
	cmd := &cobra.Command{
		Use:   "append --id ID [--at-end]",
		Short: "Append JSONL events from stdin to a live session",
		Long: `Append events read from stdin as JSONL, one event per line (blank lines are
skipped), to a live session through its Append update. Events carry their own
seqs, which must continue the session's. They are sent in batches of at most
--max-batch-bytes encoded bytes (at most the session's own limit) and
--batch-events events; each batch returns once it is durably stored. On a
terminal, a large input shows its progress on stderr.

A line that is not a valid event stops the command before its batch is sent;
the session refuses a batch whose seqs do not continue it with "append seq
mismatch". Batches stored before a failure stay stored.

With --at-end the seqs of the input are ignored: each batch is appended at the
end of the log, numbered by the session after every batch it accepted before,
so that several writers may append at once without agreeing on seqs. Such a
batch is identified by its update alone: after a failure whose outcome is
unknown, read the log before sending the input again.` + lifecycleNote,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireID(id); err != nil {
				return err
			}
			if maxBytes < 1 || maxBytes > wire.MaxMaxBatchBytes {
				return usageErrorf("--max-batch-bytes must be between 1 and %d, got %d", wire.MaxMaxBatchBytes, maxBytes)
			}
			if maxEvents < 1 {
				return usageErrorf("--batch-events must be at least 1, got %d", maxEvents)
			}
			co := client.Options{MaxBatchBytes: maxBytes, MaxBatchEvents: maxEvents}
			return a.withClientOptions(cmd, conn, co, func(ctx context.Context, c *client.Client) error {
				var (
					bar      *progress
					progress func(int64)
				)
				if isTerminal(a.stderr) {
					bar = newProgress(a.stderr, fmt.Sprintf("appending to session %q", id), inputSize(a.stdin))
					progress = bar.update
				}
				stream := c.AppendStream
				if atEnd {
					stream = c.AppendStreamAtEnd
				}
				res, err := stream(ctx, id, a.stdin, progress)
				if bar != nil {
					bar.finish()
				}
				if err != nil {
					if res.Events > 0 {
						return fmt.Errorf("%w (%d events from earlier batches were appended, next seq %d)", err, res.Events, res.NextSeq)
					}
					return err
				}
				if res.Events == 0 {
					_, err = fmt.Fprintf(a.stdout, "no events on stdin; session %q unchanged\n", id)
					return err
				}
				_, err = fmt.Fprintf(a.stdout, "appended %d events to session %q in %d batches (next seq %d)\n", res.Events, id, res.Batches, res.NextSeq)
				return err
			})
		},
	}
	conn = addConnFlags(cmd)
	cmd.Flags().StringVar(&id, "id", "", "session id (required)")
	cmd.Flags().IntVar(&maxBytes, "max-batch-bytes", wire.DefaultMaxBatchBytes, "encoded bytes per Append batch, at most the session's limit")
	cmd.Flags().IntVar(&maxEvents, "batch-events", client.DefaultMaxBatchEvents, "events per Append batch")
	cmd.Flags().BoolVar(&atEnd, "at-end", false, "append each batch at the end of the log, ignoring the input's seqs (Append with atEnd)")
	return cmd
}

func newDisposeCmd(a *app) *cobra.Command {
	var id string
	var asJSON bool
	var conn *connFlags
	cmd := &cobra.Command{
		Use:   "dispose --id ID",
		Short: "Dispose a live session",
		Long: `Dispose a live session through its Dispose update: the dispose hook runs,
pending appends are stored, the write handle is closed and the workflow
completes. Several failures are reported together: agent "<ID>" disposal
failed: <m1>; <m2>.` + lifecycleNote,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withID(cmd, conn, id, func(ctx context.Context, c *client.Client) error {
				res, err := c.Dispose(ctx, id)
				if err != nil {
					return err
				}
				return printResult(a, asJSON, res, func(w io.Writer, res wire.DisposeResult) error {
					_, err := fmt.Fprintf(w, "disposed session %q (next seq %d)\n", id, res.NextSeq)
					return err
				})
			})
		},
	}
	conn = addConnFlags(cmd)
	cmd.Flags().StringVar(&id, "id", "", "session id (required)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}

func newCancelCmd(a *app) *cobra.Command {
	var id, reason string
	var conn *connFlags
	cmd := &cobra.Command{
		Use:   "cancel --id ID [--reason TEXT]",
		Short: "Abort a session being created or resumed (a live one is disposed)",
		Long: `Send the Abort signal with --reason and cancel the session's workflow. Before
the session is live this aborts its creation or resume (rolled back; the
failure reads agent "<ID>" creation aborted); a live session is disposed. The
command returns once the request is delivered.` + lifecycleNote,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withID(cmd, conn, id, func(ctx context.Context, c *client.Client) error {
				if err := c.Cancel(ctx, id, reason); err != nil {
					return err
				}
				_, err := fmt.Fprintf(a.stdout, "cancellation of session %q requested\n", id)
				return err
			})
		},
	}
	conn = addConnFlags(cmd)
	cmd.Flags().StringVar(&id, "id", "", "session id (required)")
	cmd.Flags().StringVar(&reason, "reason", "", "abort reason")
	return cmd
}

func newDescribeCmd(a *app) *cobra.Command {
	var id string
	var asJSON bool
	var conn *connFlags
	cmd := &cobra.Command{
		Use:   "describe --id ID [--json]",
		Short: "Describe a session's workflow",
		Long: `Query the session workflow's Describe query: phase (preparing, setup, committing,
live, disposing, closed), source, write handle, next seq, pending events,
published lifecycle entries, and the failure and failed compensations of a
rolled-back run. --json prints the query result as it is.` + lifecycleNote,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withID(cmd, conn, id, func(ctx context.Context, c *client.Client) error {
				d, err := c.Describe(ctx, id)
				if err != nil {
					return err
				}
				return printResult(a, asJSON, d, renderDescription)
			})
		},
	}
	conn = addConnFlags(cmd)
	cmd.Flags().StringVar(&id, "id", "", "session id (required)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the description as JSON")
	return cmd
}

// renderDescription writes a Description as aligned text.
func renderDescription(w io.Writer, d wire.Description) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "session\t%s\n", displayText(d.SessionID))
	fmt.Fprintf(tw, "phase\t%s\n", d.Phase)
	fmt.Fprintf(tw, "source\t%s\n", orDash(d.Source))
	handle := "-"
	if d.Handle != nil {
		state := "closed"
		if d.HandleOpen {
			state = "open"
		}
		handle = fmt.Sprintf("%s (%s, %s)", d.Handle.HandleID, d.Handle.Access, state)
	}
	fmt.Fprintf(tw, "handle\t%s\n", handle)
	fmt.Fprintf(tw, "next seq\t%d\n", d.NextSeq)
	fmt.Fprintf(tw, "pending events\t%d\n", d.PendingEvents)
	entries := make([]string, 0, len(d.Lifecycle))
	for _, e := range d.Lifecycle {
		if e.Source != "" {
			entries = append(entries, e.Type+" ("+e.Source+")")
		} else {
			entries = append(entries, e.Type)
		}
	}
	fmt.Fprintf(tw, "lifecycle\t%s\n", orDash(termText(strings.Join(entries, ", "), false)))
	if d.Failure != nil {
		fmt.Fprintf(tw, "failure\t%s\n", errorInfoText(*d.Failure))
	}
	for _, c := range d.CompensationErrors {
		fmt.Fprintf(tw, "compensation error\t%s: %s\n", c.Step, errorInfoText(c.Error))
	}
	return tw.Flush()
}

// errorInfoText renders an ErrorInfo as "message (type)".
func errorInfoText(e wire.ErrorInfo) string {
	if e.Type == "" {
		return termText(e.Message, false)
	}
	return termText(e.Message+" ("+e.Type+")", false)
}

func newListCmd(a *app) *cobra.Command {
	var asJSON bool
	var conn *connFlags
	cmd := &cobra.Command{
		Use:   "list [--json]",
		Short: "List the running sessions",
		Long: `List the running session workflows through Temporal visibility (eventually
consistent: a session started or closed a moment ago may be missing or still
listed), sorted by session id: session id, phase, cwd, workflow type, start
time of the run. Sessions whose workflow carries the SessionId, SessionPhase
and SessionCwd search attributes are read from them (FROM "attributes");
others from the workflow id, the Describe query and the start input (FROM
"describe"). --json prints one JSON array.` + lifecycleNote,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withClient(cmd, conn, func(ctx context.Context, c *client.Client) error {
				list, err := c.List(ctx)
				if err != nil {
					return err
				}
				if list == nil {
					list = []client.ListedSession{} // JSON: [], not null
				}
				return printResult(a, asJSON, list, renderList)
			})
		},
	}
	conn = addConnFlags(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON array")
	return cmd
}

// renderList writes running sessions as a table.
func renderList(w io.Writer, list []client.ListedSession) error {
	if len(list) == 0 {
		_, err := fmt.Fprintln(w, "no running sessions")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SESSION\tPHASE\tCWD\tWORKFLOW TYPE\tSTARTED\tFROM")
	for _, s := range list {
		phase := string(s.Phase)
		if phase == "" {
			phase = "?"
		}
		from := "attributes"
		if s.Source == client.SourceDescribe {
			from = "describe"
		}
		started := "-"
		if !s.StartTime.IsZero() {
			started = formatMillis(s.StartTime.UnixMilli())
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", displayText(s.SessionID), phase, displayText(orDash(s.Cwd)), s.WorkflowType, started, from)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, s := range list {
		if s.Error != "" {
			fmt.Fprintf(w, "%s: %s\n", displayText(s.SessionID), termText(s.Error, false))
		}
	}
	return nil
}
