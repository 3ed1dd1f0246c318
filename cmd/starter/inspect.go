package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// inspectReport is the output of `log inspect --json`.
type inspectReport struct {
	Header              wire.Header   `json:"header"`
	FormatVersion       int           `json:"formatVersion"`
	MigratedFrom        string        `json:"migratedFrom,omitempty"`
	Path                string        `json:"path,omitempty"`
	Pending             bool          `json:"pending"`
	EventCount          int           `json:"eventCount"`
	RecoveredEvents     int           `json:"recoveredEvents"`
	NextSeq             int64         `json:"nextSeq"`
	LastTurnEndSeq      *int64        `json:"lastTurnEndSeq"`
	LastTurn            int64         `json:"lastTurn"`
	InheritedEventCount int64         `json:"inheritedEventCount"`
	OpenTurn            *openTurnJSON `json:"openTurn"`
	OpenTurnError       string        `json:"openTurnError,omitempty"`
	FileSize            int64         `json:"fileSize"`
	CommittedBytes      int64         `json:"committedBytes"`
	TornBytes           int64         `json:"tornBytes"`
	Lease               *wire.Lease   `json:"lease"`
}

// openTurnJSON is the unfinished turn at the end of a log.
type openTurnJSON struct {
	Turn int64 `json:"turn"`
	// Step is the open step, or null when no step is open.
	Step         *int64            `json:"step"`
	PendingCalls []pendingCallJSON `json:"pendingCalls"`
}

// pendingCallJSON is a call of the open turn without a result.
type pendingCallJSON struct {
	CallID   string `json:"callId"`
	Step     int64  `json:"step"`
	Recorded bool   `json:"recorded"`
	// CallSeq is the seq of the tool/call that recorded the call, or null.
	CallSeq *int64 `json:"callSeq"`
}

func newLogInspectCmd(a *app, sf *storeFlags) *cobra.Command {
	var id string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "inspect --id ID [--json]",
		Short: "Diagnose a session log",
		Long: `Describe a session log without modifying it or taking its lease: header, event
count, next seq, seq of the last turn/end, the open turn (its open step and the
calls without a result, each with whether it was recorded as a tool/call), the
torn tail (file size minus committed size; the next write cuts it), records
recovered from a torn zstd frame, and the current lease holder.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := a.storeFor(sf, id)
			if err != nil {
				return err
			}
			in, err := st.Inspect(cmd.Context(), id)
			if err != nil {
				return err
			}
			rep := buildReport(in)
			if asJSON {
				return writeJSON(a.stdout, rep)
			}
			_, err = fmt.Fprint(a.stdout, rep.text())
			return err
		},
	}
	cmd.Flags().StringVar(&id, "id", "", "session id (required)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}

func buildReport(in *jsonl.Inspection) inspectReport {
	rep := inspectReport{
		Header:              in.Header,
		FormatVersion:       in.Header.Version,
		MigratedFrom:        in.MigratedFrom,
		Path:                in.Path,
		Pending:             in.Pending,
		EventCount:          len(in.Events),
		RecoveredEvents:     in.Recovered,
		NextSeq:             session.NextSeq(in.Events),
		LastTurn:            session.LastTurn(in.Events),
		InheritedEventCount: in.InheritedEventCount,
		FileSize:            in.FileSize,
		CommittedBytes:      in.CommittedBytes,
		TornBytes:           in.TornBytes,
		Lease:               in.Lease,
	}
	for i := len(in.Events) - 1; i >= 0; i-- {
		if in.Events[i].Type == wire.TypeTurnEnd {
			seq := in.Events[i].Seq
			rep.LastTurnEndSeq = &seq
			break
		}
	}
	ot, open, err := session.ScanOpenTurn(in.Events)
	switch {
	case err != nil:
		rep.OpenTurnError = err.Error()
	case open:
		j := &openTurnJSON{Turn: ot.Turn, PendingCalls: []pendingCallJSON{}}
		if ot.Step > 0 {
			step := ot.Step
			j.Step = &step
		}
		for _, c := range ot.PendingCalls {
			p := pendingCallJSON{CallID: c.CallID, Step: c.Step, Recorded: c.Recorded()}
			if c.Recorded() {
				seq := c.CallSeq
				p.CallSeq = &seq
			}
			j.PendingCalls = append(j.PendingCalls, p)
		}
		rep.OpenTurn = j
	}
	return rep
}

// text renders the report for a terminal.
func (r inspectReport) text() string {
	var b strings.Builder
	// Each row on its line, whatever a header field holds (termText).
	row := func(k, format string, args ...any) {
		fmt.Fprintf(&b, "%-16s %s\n", k+":", termText(fmt.Sprintf(format, args...), false))
	}
	h := r.Header
	row("session", "%q", h.ID)
	if r.Pending {
		row("path", "(pending: created, never written)")
	} else {
		row("path", "%s", r.Path)
	}
	row("format", "%s", formatName(r.FormatVersion))
	if r.MigratedFrom != "" {
		row("migrated from", "%s (kept beside the log, never modified)", r.MigratedFrom)
	}
	row("created", "%s (%d)", formatMillis(h.CreatedAt), h.CreatedAt)
	if h.Cwd != "" {
		row("cwd", "%s", h.Cwd)
	}
	if h.ParentSession != "" {
		row("parent", "%q", h.ParentSession)
	}
	if h.Origin != "" {
		row("origin", "%s", h.Origin)
	}
	if h.AgentPreset != "" {
		row("agent preset", "%s", h.AgentPreset)
	}
	row("seeded", "%t (inherited events: %d)", h.IsSeeded, r.InheritedEventCount)
	row("delegation", "%d", h.DelegationDepth)
	if r.RecoveredEvents > 0 {
		row("events", "%d (%d recovered from a torn zstd frame)", r.EventCount, r.RecoveredEvents)
	} else {
		row("events", "%d", r.EventCount)
	}
	row("next seq", "%d", r.NextSeq)
	if r.LastTurnEndSeq != nil {
		row("last turn/end", "seq %d", *r.LastTurnEndSeq)
	} else {
		row("last turn/end", "none")
	}
	switch {
	case r.OpenTurnError != "":
		row("open turn", "unreadable: %s", r.OpenTurnError)
	case r.OpenTurn == nil:
		row("open turn", "none")
	default:
		ot := r.OpenTurn
		if ot.Step != nil {
			row("open turn", "turn %d, step %d open", ot.Turn, *ot.Step)
		} else {
			row("open turn", "turn %d, no step open", ot.Turn)
		}
		for _, c := range ot.PendingCalls {
			if c.Recorded {
				row("dangling call", "%q (step %d), recorded as tool/call seq %d", c.CallID, c.Step, *c.CallSeq)
			} else {
				row("dangling call", "%q (step %d), not recorded as started", c.CallID, c.Step)
			}
		}
	}
	if !r.Pending {
		row("file size", "%d bytes", r.FileSize)
		row("committed", "%d bytes", r.CommittedBytes)
		row("torn tail", "%d bytes", r.TornBytes)
	}
	if r.Lease != nil {
		row("lease", "%s", describeLease(r.Lease))
	} else {
		row("lease", "none")
	}
	return b.String()
}

// formatName describes a log format version.
func formatName(v int) string {
	if v == wire.FormatVersionV0 {
		return "v0 (the published DeepSeek Harness's format; a write migrates it to v3)"
	}
	return fmt.Sprintf("v%d", v)
}
