package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/sessionflow/sessionflow/client"
	"github.com/sessionflow/sessionflow/wire"
)

const loopLong = `Start and stop SessionLoop hosts. A loop runs as workflow loop/<LOOPID> on
the task queue; it starts its configured sessions as child workflows and, when
stopped, refuses new work, aborts the sessions still starting, disposes the
live ones and completes once all have settled.`

func newLoopCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "loop",
		Short: "Start and stop session loops",
		Long:  loopLong,
		Args:  cobra.ArbitraryArgs,
		RunE:  groupRunE,
	}
	cmd.AddCommand(newLoopStartCmd(a), newLoopStopCmd(a))
	return cmd
}

func newLoopStartCmd(a *app) *cobra.Command {
	var id, config string
	var conn *connFlags
	cmd := &cobra.Command{
		Use:   "start --id LOOPID [--config FILE]",
		Short: "Start a session loop",
		Long: `Start a SessionLoop workflow (workflow id loop/<LOOPID>). --config FILE is
its input as JSON (docs/API.md, SessionLoopInput: agents,
maxParallelToolCalls, configuredAgentIdentities, hooks, options,
sessionTaskQueue); without it the loop starts with no configured agents. A
running loop of the same id fails with: loop "<LOOPID>" is already running.` + lifecycleNote,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireID(id); err != nil {
				return err
			}
			in, err := readLoopConfig(config)
			if err != nil {
				return err
			}
			return a.withClient(cmd, conn, func(ctx context.Context, c *client.Client) error {
				l, err := c.LoopStart(ctx, id, in, conn.callOptions()...)
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(a.stdout, "started loop %q: workflow %s (run %s)\n", id, l.WorkflowID, l.RunID)
				return err
			})
		},
	}
	conn = addConnFlags(cmd)
	conn.addOnShard()
	cmd.Flags().StringVar(&id, "id", "", "loop id (required)")
	cmd.Flags().StringVar(&config, "config", "", "JSON file of the loop's input")
	return cmd
}

// readLoopConfig reads a SessionLoopInput; unknown fields are refused, so a
// misspelt key is not silently dropped.
func readLoopConfig(path string) (wire.SessionLoopInput, error) {
	var in wire.SessionLoopInput
	if path == "" {
		return in, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return in, usageErrorf("--config: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return in, usageErrorf("--config %s: %w", path, err)
	}
	if dec.More() {
		return in, usageErrorf("--config %s: more than one JSON value", path)
	}
	return in, nil
}

func newLoopStopCmd(a *app) *cobra.Command {
	var id string
	var noWait, asJSON bool
	var conn *connFlags
	cmd := &cobra.Command{
		Use:   "stop --id LOOPID [--no-wait] [--json]",
		Short: "Stop a session loop",
		Long: `Cancel the loop's workflow (deactivation) and wait until it completes, then
print its final description: every child session and how it settled.
--no-wait returns once the cancellation is requested.` + lifecycleNote,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withID(cmd, conn, id, func(ctx context.Context, c *client.Client) error {
				if err := c.LoopStop(ctx, id); err != nil {
					return err
				}
				if noWait {
					_, err := fmt.Fprintf(a.stdout, "stop of loop %q requested\n", id)
					return err
				}
				d, err := c.LoopResult(ctx, id)
				if err != nil {
					return err
				}
				return printResult(a, asJSON, d, func(w io.Writer, d wire.LoopDescription) error {
					return renderLoop(w, id, d)
				})
			})
		},
	}
	conn = addConnFlags(cmd)
	cmd.Flags().StringVar(&id, "id", "", "loop id (required)")
	cmd.Flags().BoolVar(&noWait, "no-wait", false, "return once the stop is requested")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the final description as JSON")
	return cmd
}

// renderLoop writes a loop's final description.
func renderLoop(w io.Writer, id string, d wire.LoopDescription) error {
	fmt.Fprintf(w, "loop %q stopped: %d sessions\n", id, len(d.Children))
	if len(d.Children) > 0 {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "SESSION\tMODE\tCONFIG\tSTATE\tWAS LIVE\tERROR")
		for _, c := range d.Children {
			errText := "-"
			if c.Error != nil {
				errText = errorInfoText(*c.Error)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%t\t%s\n", displayText(c.SessionID), c.Mode, displayText(orDash(c.ConfigID)), c.State, c.WasLive, errText)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	for _, f := range d.ConfigStartFailures {
		fmt.Fprintf(w, "config start failed: agent %q: %s of %q: %s\n", f.ConfigID, f.Mode, f.SessionID, errorInfoText(f.Error))
	}
	return nil
}
