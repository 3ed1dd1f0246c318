package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

func newLogRepairCmd(a *app, sf *storeFlags) *cobra.Command {
	var id string
	var force bool
	cmd := &cobra.Command{
		Use:   "repair --id ID [--force]",
		Short: "Close an interrupted turn as a resume would",
		Long: `Repair a session the way resuming it would (docs/FORMAT.md §5.5):
close an unfinished turn with synthesized events (a tool/result for every call without a result,
TOOL_OUTCOME_UNKNOWN when the call was recorded as started and TOOL_NOT_STARTED
otherwise, then step/end if a step is open, then turn/end {interrupted}), and
add the session/end-seed marker unless the log already ends with one. Closers
and marker are appended as one batch; a torn tail is cut first, in the same
write. Prints one line per appended event (seq, type, and the error code of a
tool result), or "nothing to repair" (a torn tail then stays in place until
the next append, which cuts it). Whatever a cut removes is first copied to a
quarantine file beside the log, <log>.broken-<offset>.

A raw log whose damage is followed by complete valid records is corrupt, not
torn (a crash tears only the last write): repair refuses it. --force cuts such
a log at its first damage, valid records after it included, before repairing;
it prints what it cut and where the removed bytes were saved.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := a.storeFor(sf, id)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			line := startElapsed(a.stderr, isTerminal(a.stderr), fmt.Sprintf("repairing %q", id), elapsedDelay, time.Second)
			h, err := st.Open(ctx, id, jsonl.AccessWrite, jsonl.OpenOptions{
				HandleID: newHandleID(), Owner: newOwner(), Cut: jsonl.CutOptions{Force: force}})
			var appended []session.Event
			var cut *jsonl.TailCut
			if err == nil {
				if force {
					cut, err = h.CutTail(ctx)
				}
				if err == nil {
					appended, err = repair(ctx, h, a.now().UnixMilli())
				}
				err = closeHandle(ctx, h, err)
			}
			line.stopElapsed()
			if cut != nil {
				// Reported even when the repair after it failed: the cut is done.
				if _, perr := fmt.Fprintf(a.stdout, "cut %d bytes at byte %d; saved to %s\n", cut.Bytes, cut.Offset, cut.Quarantine); perr != nil && err == nil {
					err = perr
				}
			}
			if errors.Is(err, jsonl.ErrDamageNotTorn) && !force {
				return fmt.Errorf("%w\n(--force cuts the log at the damage after saving every byte it removes beside the log)", err)
			}
			if err != nil {
				return err
			}
			if len(appended) == 0 {
				if _, err := fmt.Fprintln(a.stdout, "nothing to repair"); err != nil {
					return err
				}
				// Only a write cuts a torn tail; with nothing to write it stays.
				in, err := st.Inspect(ctx, id)
				if err != nil || in.TornBytes == 0 {
					return err
				}
				_, err = fmt.Fprintf(a.stdout, "a torn tail of %d bytes stays in place until the next append cuts it\n", in.TornBytes)
				return err
			}
			return printEvents(a.stdout, appended)
		},
	}
	cmd.Flags().StringVar(&id, "id", "", "session id (required)")
	cmd.Flags().BoolVar(&force, "force", false, "cut a raw log at its first damage even when complete valid records follow it (they are saved to a quarantine file)")
	return cmd
}

// repair appends the interrupted-turn closers and the end-seed marker that a
// resume would store, as one batch, and returns them.
func repair(ctx context.Context, h *jsonl.Handle, now int64) ([]session.Event, error) {
	events, err := h.Read(ctx, 0, -1)
	if err != nil {
		return nil, err
	}
	var sc session.TurnScanner
	var last *session.Event
	for i := range events {
		if err := sc.Observe(events[i]); err != nil {
			return nil, fmt.Errorf("scan the open turn: %w", err)
		}
		last = &events[i]
	}
	batch, _, err := sc.CrashRepair(last, now)
	if err != nil {
		return nil, fmt.Errorf("scan the open turn: %w", err)
	}
	if len(batch) == 0 {
		return nil, nil
	}
	if err := h.Append(ctx, batch); err != nil {
		return nil, err
	}
	return batch, nil
}

// printEvents prints one line per event: seq, type, and for a tool result
// with an error its code. A run of assistant/chunk events (a model call's
// stream, docs/FORMAT.md §1.2) is one line: its first and last seq and how
// many.
func printEvents(w io.Writer, events []session.Event) error {
	for i := 0; i < len(events); i++ {
		e := events[i]
		line := fmt.Sprintf("%d %s", e.Seq, e.Type)
		switch e.Type {
		case wire.TypeToolResult:
			if r, err := e.ToolResult(); err == nil && r.Error != nil {
				line += " " + r.Error.Code
			}
		case wire.TypeAssistantChunk:
			j := i
			for j+1 < len(events) && events[j+1].Type == wire.TypeAssistantChunk {
				j++
			}
			if j > i {
				line = fmt.Sprintf("%d..%d %s ×%d", e.Seq, events[j].Seq, e.Type, j-i+1)
				i = j
			}
		}
		if _, err := fmt.Fprintln(w, line); err != nil {
			return err
		}
	}
	return nil
}
