package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sessionflow/sessionflow/client"
	"github.com/sessionflow/sessionflow/wire"
)

func newTurnCmd(a *app) *cobra.Command {
	var id, prompt, messageID string
	var asJSON bool
	var conn *connFlags
	sf := &storeFlags{}
	cmd := &cobra.Command{
		Use:   "turn --id ID --prompt TEXT [--json]",
		Short: "Send a prompt to a live session's agent and follow its turn",
		Long: `Queue --prompt as the next turn's user message (the Followup update) and follow
the turn that claims it: the answer's text as it streams (from the model
activity's heartbeats), one line per tool call started and finished (and, for a
call waiting for approval, what it asks and how to decide: starter approve,
starter reject), and how the turn ended. With the store root (--root DIR or $` + envRoot + `, on the
worker's machine) each step's stored answer is read when the step ends: the
text that streamed between two polls is printed, and --json includes the
turn's events. A model call that is retried streams its text again: a line
"↻ (the model call was retried; the text above is discarded)" comes before it.

--json prints one JSON object per line: {"kind":"queued"|"started"|"text"|
"reasoning"|"tool-started"|"tool-finished"|"approval"|"ended", "turn", "step",
"text", "gap", "restart", "call", "approval", "info", "events"}.` + lifecycleNote,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireID(id); err != nil {
				return err
			}
			if prompt == "" {
				return usageErrorf("--prompt is required")
			}
			reader, err := a.optionalReader(sf)
			if err != nil {
				return err
			}
			return a.withClient(cmd, conn, func(ctx context.Context, c *client.Client) error {
				content, _ := json.Marshal(prompt)
				in, err := c.Followup(ctx, id, wire.InputRequest{MessageID: messageID, Content: content})
				if err != nil {
					return err
				}
				return followTurn(ctx, a.stdout, c, id, in.MessageID, client.WatchOptions{Events: reader, Live: a.optionalLive(sf)}, asJSON)
			})
		},
	}
	conn = addConnFlags(cmd)
	cmd.Flags().StringVar(&id, "id", "", "session id (required)")
	cmd.Flags().StringVar(&prompt, "prompt", "", "the user message (required)")
	cmd.Flags().StringVar(&messageID, "message-id", "", "the message's id (default: chosen by the session)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the progress as JSON lines")
	sf.addRoot(cmd.Flags(), "store root, to read the turn's events (default $"+envRoot+")")
	return cmd
}

// followTurn prints the progress of the turn that claims messageID. The
// text of each step is printed as it streams; a retried model call's text
// starts over after a line saying the text above was discarded; with the
// store reader, the stored answer's text the polls missed is printed too
// (client.WatchTurn yields it), and with the live source the text is
// printed as the model activity writes it.
func followTurn(ctx context.Context, w io.Writer, c *client.Client, id, messageID string, opts client.WatchOptions, asJSON bool) error {
	step := int64(-1)
	midLine := false
	newline := func() {
		if midLine {
			fmt.Fprintln(w)
			midLine = false
		}
	}
	for p, err := range c.WatchTurn(ctx, id, messageID, opts) {
		if err != nil {
			newline()
			return err
		}
		if asJSON {
			b, err := json.Marshal(p)
			if err != nil {
				return err
			}
			if _, err := fmt.Fprintf(w, "%s\n", termJSON(b)); err != nil {
				return err
			}
			continue
		}
		switch p.Kind {
		case client.ProgressText:
			if p.Step != step {
				newline()
				step = p.Step
			}
			if p.Restart {
				newline()
				fmt.Fprintln(w, retriedNote)
			}
			if p.Gap {
				fmt.Fprint(w, "…")
				midLine = true
			}
			fmt.Fprint(w, termText(p.Text, true))
			midLine = midLine || p.Text != ""
		case client.ProgressToolStarted:
			newline()
			fmt.Fprintf(w, "→ %s (%s)\n", displayText(p.Call.Name), displayText(p.Call.ID))
		case client.ProgressToolFinished:
			newline()
			mark, code := "✓", ""
			switch {
			case p.Call.State == wire.CallSkipped:
				mark = "⊘ skipped"
			case p.Call.State == wire.CallFailed:
				mark = "✗ failed"
			case p.Call.IsError:
				mark, code = "✗", " "+termText(p.Call.Code, false)
			}
			fmt.Fprintf(w, "%s %s (%s)%s\n", mark, displayText(p.Call.Name), displayText(p.Call.ID), code)
		case client.ProgressApproval:
			newline()
			fmt.Fprint(w, approvalNotice(id, *p.Approval))
		case client.ProgressEnded:
			newline()
			fmt.Fprintf(w, "turn %d %s\n", p.Info.Turn, describeReason(p.Info))
		}
	}
	return nil
}

// approvalNotice is what starter turn prints of a call waiting for
// approval: the call, the reason, its arguments on one line and how to
// decide.
func approvalNotice(id string, a wire.PendingApproval) string {
	var b strings.Builder
	fmt.Fprintf(&b, "⏸ %s (%s) waits for approval", displayText(a.Tool), displayText(a.CallID))
	if a.Reason != "" {
		fmt.Fprintf(&b, ": %s", termText(a.Reason, false))
	}
	args := clip(argsLine(a.Arguments), maxTextShown)
	if a.Truncated {
		args += " (cut)"
	}
	fmt.Fprintf(&b, "\n  %s\n", termText(args, false))
	fmt.Fprintf(&b, "  starter approve --id %s --call %s [--always], or starter reject --id %s --call %s\n",
		displayText(id), displayText(a.CallID), displayText(id), displayText(a.CallID))
	return b.String()
}

// retriedNote is the line printed before the text of a model call that
// starts over: the text printed above it for that step was discarded.
const retriedNote = "↻ (the model call was retried; the text above is discarded)"

// describeReason renders a turn's end, on one line (termText).
func describeReason(s *wire.TurnInfo) string {
	return termText(rawReason(s), false)
}

// rawReason is describeReason before it is made safe for the terminal.
func rawReason(s *wire.TurnInfo) string {
	r := s.Reason
	switch {
	case r == nil:
		return "running"
	case len(r.Error) > 0:
		var f struct {
			Message string `json:"message"`
			Code    string `json:"code"`
		}
		_ = json.Unmarshal(r.Error, &f)
		return fmt.Sprintf("%s: %s (%s)", r.Kind, f.Message, f.Code)
	case len(r.Reason) > 0:
		return fmt.Sprintf("%s (%s)", r.Kind, r.Reason)
	}
	return r.Kind
}
