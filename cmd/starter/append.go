package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
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
// at most maxEvents events and maxAppendBatchSize encoded bytes. It returns
// the number of events appended.
func appendStream(ctx context.Context, h eventAppender, r io.Reader, maxEvents int) (int64, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var (
		appended int64
		pending  []session.Event
		size     int
		lineNo   int64
	)
	flush := func() error {
		if len(pending) == 0 {
			return nil
		}
		if err := h.Append(ctx, pending); err != nil {
			return err
		}
		appended += int64(len(pending))
		pending, size = pending[:0], 0
		return nil
	}
	for {
		line, rerr := br.ReadBytes('\n')
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			return appended, fmt.Errorf("read stdin: %w", rerr)
		}
		if len(line) > 0 {
			lineNo++
			if trimmed := bytes.TrimSpace(line); len(trimmed) > 0 {
				e, err := parseEventLine(trimmed)
				if err != nil {
					return appended, fmt.Errorf("stdin line %d: %w", lineNo, err)
				}
				enc, err := e.MarshalJSON()
				if err != nil {
					return appended, fmt.Errorf("stdin line %d: %w", lineNo, err)
				}
				if len(pending) > 0 && size+len(enc)+1 > maxAppendBatchSize {
					if err := flush(); err != nil {
						return appended, err
					}
				}
				pending = append(pending, e)
				size += len(enc) + 1
				if len(pending) >= maxEvents {
					if err := flush(); err != nil {
						return appended, err
					}
				}
			}
		}
		if rerr != nil { // io.EOF
			return appended, flush()
		}
	}
}

// parseEventLine decodes one JSONL line into a valid event this build can
// read back.
func parseEventLine(line []byte) (session.Event, error) {
	var e session.Event
	if err := json.Unmarshal(line, &e); err != nil {
		return e, fmt.Errorf("not a valid event: %w", err)
	}
	if err := e.Validate(); err != nil {
		return e, fmt.Errorf("not a valid event: %w", err)
	}
	if !e.Interpretable() {
		return e, fmt.Errorf("not a valid event: type %q is unknown to this build and not marked ignorable", e.Type)
	}
	return e, nil
}
