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

// Batch bounds of `log append`.
const (
	defaultAppendBatch = 256
	maxAppendBatchSize = 1 << 20 // encoded bytes per batch
)

func newLogAppendCmd(a *app, sf *storeFlags) *cobra.Command {
	var id string
	var batch int
	cmd := &cobra.Command{
		Use:   "append --id ID [--batch N]",
		Short: "Append JSONL events from stdin",
		Long: `Append events read from stdin as JSONL, one event per line (blank lines are
skipped), to an existing session. Events must carry the seqs that continue the
log. They are appended in batches of at most N events and 1 MiB of encoded
events; each batch is durable when it is written.

A line that is not a valid event (malformed JSON, envelope rules, an event type
unknown to this build and not marked ignorable) stops the command with an error
naming its line number; nothing of the batch holding that line is written,
earlier batches stay appended. A seq that does not continue the log fails with
"append seq mismatch".`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireID(id); err != nil {
				return err
			}
			if batch < 1 {
				return usageErrorf("--batch must be at least 1, got %d", batch)
			}
			st, err := a.openStore(sf)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			h, err := openWrite(ctx, st, id)
			if err != nil {
				return err
			}
			line := startElapsed(a.stderr, isTerminal(a.stderr), fmt.Sprintf("appending to %q", id), elapsedDelay, time.Second)
			n, err := appendStream(ctx, h, a.stdin, batch)
			line.stopElapsed()
			if err == nil {
				if cerr := h.Close(ctx); cerr != nil {
					return closeAfterAppend(ctx, a, st, h, n, cerr)
				}
			} else if err := closeHandle(ctx, h, err); err != nil {
				if n > 0 {
					return fmt.Errorf("%w (%d events from earlier batches were appended)", err, n)
				}
				return err
			}
			_, err = fmt.Fprintf(a.stdout, "appended %d events to session %q\n", n, id)
			return err
		},
	}
	cmd.Flags().StringVar(&id, "id", "", "session id (required)")
	cmd.Flags().IntVar(&batch, "batch", defaultAppendBatch, "events per append batch")
	return cmd
}

// eventAppender is the part of a write handle appendStream uses.
type eventAppender interface {
	Append(ctx context.Context, events []session.Event) error
}

var _ eventAppender = (*jsonl.Handle)(nil)

// appendStream reads JSONL events from r and appends them to h in batches of
// at most maxEvents events and maxAppendBatchSize encoded bytes (an event
// larger on its own is a batch by itself). It returns the number of events
// appended.
func appendStream(ctx context.Context, h eventAppender, r io.Reader, maxEvents int) (int64, error) {
	br := session.NewBatchReader(r, wire.BatchLimits{MaxBytes: maxAppendBatchSize, MaxEvents: maxEvents, OversizeAlone: true})
	var appended int64
	for {
		b, err := br.Next()
		if errors.Is(err, io.EOF) {
			return appended, nil
		}
		var le *wire.LineError
		switch {
		case errors.As(err, &le):
			return appended, fmt.Errorf("stdin %w", le)
		case err != nil:
			return appended, fmt.Errorf("read stdin: %w", err)
		}
		if err := h.Append(ctx, b.Events); err != nil {
			return appended, err
		}
		appended += int64(len(b.Events))
	}
}
