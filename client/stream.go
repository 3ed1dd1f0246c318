package client

import (
	"context"
	"errors"
	"fmt"
	"io"

	temporalclient "go.temporal.io/sdk/client"

	"github.com/sessionflow/sessionflow/wire"
)

// maxInFlight bounds the Append updates AppendStream keeps accepted but not
// yet stored: the session coalesces them into one store activity per window
// instead of one window per batch.
const maxInFlight = 4

// StreamResult is the outcome of AppendStream.
type StreamResult struct {
	// Events is the number of events durably stored.
	Events int64 `json:"events"`
	// Batches is the number of Append updates that stored them.
	Batches int `json:"batches"`
	// Bytes is the number of input bytes whose events are stored: all of
	// the input after a success.
	Bytes int64 `json:"bytes"`
	// NextSeq is the session's stored cursor after the last batch (0 when
	// nothing was appended).
	NextSeq int64 `json:"nextSeq"`
}

// AppendStream appends the events read from r, one JSON event per line
// (blank lines skipped), to the live session id. The events carry their own
// seqs, which must continue the session's. They are sent as Append updates
// of at most Options.MaxBatchBytes encoded bytes and Options.MaxBatchEvents
// events; the next batch is sent once the previous one is accepted, and up to
// a few accepted batches are stored together. progress, when not nil, is
// called after each stored batch with the number of input bytes whose events
// are stored so far.
//
// A line that Options.ParseLine refuses (with session.ParseAppendLineWire:
// malformed JSON, the envelope rules, a type unknown to this build and not
// marked ignorable; with the default, a line that is not an envelope), or an
// event larger than the batch limit on its own, stops the stream before its
// batch is sent (an *Error of
// type InvalidArgument or ErrBatchTooLarge naming the line). On any failure the
// result counts the events stored before it; batches accepted after the
// failing one fail with it.
func (c *Client) AppendStream(ctx context.Context, id string, r io.Reader, progress func(done int64)) (StreamResult, error) {
	return appendStream(ctx, &updateAppender{c: c, id: id}, id, r, c.opts.ParseLine, c.opts.MaxBatchBytes, c.opts.MaxBatchEvents, progress)
}

// AppendStreamAtEnd is AppendStream with every batch appended at the end
// (as AppendAtEnd): the events' own seqs are ignored, each batch is
// numbered from 0 and the session stores it after every batch it accepted
// before; the batches of one stream are stored in their order, and other
// callers may append at the end meanwhile, their batches stored between
// this stream's. The result's NextSeq is the seq after the last batch. A
// failure whose outcome is unknown (ErrOutcomeUnknown) must not be
// answered by sending the stream again: read the log to learn which
// batches landed (docs/API.md, Appends at the end).
func (c *Client) AppendStreamAtEnd(ctx context.Context, id string, r io.Reader, progress func(done int64)) (StreamResult, error) {
	return appendStream(ctx, &updateAppender{c: c, id: id, atEnd: true}, id, r, c.opts.ParseLine, c.opts.MaxBatchBytes, c.opts.MaxBatchEvents, progress)
}

// batchAppender submits Append batches: submit returns once the session has
// accepted the batch, and the returned wait once the batch is stored.
type batchAppender interface {
	submit(ctx context.Context, events []wire.Event) (appendWait, error)
}

// appendWait waits for an accepted batch to be stored.
type appendWait func(ctx context.Context) (AppendResult, error)

// updateAppender submits Append updates to a session workflow.
type updateAppender struct {
	c  *Client
	id string
	// atEnd appends each batch at the end, numbered from 0.
	atEnd bool
}

func (u *updateAppender) submit(ctx context.Context, events []wire.Event) (appendWait, error) {
	req := wire.AppendRequest{Events: events}
	if u.atEnd {
		req.Events = make([]wire.Event, len(events))
		for i, e := range events {
			e.Seq = int64(i)
			req.Events[i] = e
		}
		req.AtEnd = true
	}
	h, err := u.c.updateWorkflow(ctx, temporalclient.UpdateWorkflowOptions{
		WorkflowID:   wire.WorkflowID(u.id),
		UpdateName:   wire.UpdateAppend,
		Args:         []any{req},
		WaitForStage: temporalclient.WorkflowUpdateStageAccepted,
	})
	if err != nil {
		return nil, appendError(u.id, err)
	}
	return func(ctx context.Context) (AppendResult, error) {
		var res AppendResult
		err := h.Get(ctx, &res)
		return res, appendError(u.id, err)
	}, nil
}

// pendingBatch is a submitted batch not yet known to be stored.
type pendingBatch struct {
	wait   appendWait
	events int64
	end    int64 // input offset after the batch's last line
}

// appendStream is AppendStream over any batchAppender.
func appendStream(ctx context.Context, a batchAppender, id string, r io.Reader, parse wire.LineParser[wire.Event], maxBytes, maxEvents int, progress func(int64)) (StreamResult, error) {
	var (
		res      StreamResult
		inflight []pendingBatch
	)
	// settle waits for the oldest in-flight batch.
	settle := func() error {
		p := inflight[0]
		inflight = inflight[1:]
		out, err := p.wait(ctx)
		if err != nil {
			return err
		}
		res.Events += p.events
		res.Batches++
		res.Bytes = p.end
		res.NextSeq = out.NextSeq
		if progress != nil {
			progress(p.end)
		}
		return nil
	}
	// fail stops the stream: the batches still in flight are settled (they
	// fail with err, or were stored before it) and err is returned.
	fail := func(err error) (StreamResult, error) {
		for len(inflight) > 0 {
			if serr := settle(); serr != nil {
				break
			}
		}
		return res, err
	}
	send := func(b wire.Batch) error {
		if len(inflight) == maxInFlight {
			if err := settle(); err != nil {
				return err
			}
		}
		wait, err := a.submit(ctx, b.Events)
		if err != nil {
			return err
		}
		inflight = append(inflight, pendingBatch{wait: wait, events: int64(len(b.Events)), end: b.End})
		return nil
	}

	br := wire.NewBatchReaderOf(r, wire.BatchLimits{MaxBytes: maxBytes, MaxEvents: maxEvents}, parse)
	for {
		b, err := br.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		var le *wire.LineError
		switch {
		case errors.As(err, &le) && errors.Is(err, wire.ErrEventTooLarge):
			return fail(&Error{Type: wire.ErrTypeBatchTooLarge, SessionID: id,
				Message: fmt.Sprintf("line %d: append batch of %d bytes exceeds the batch limit of %d bytes", le.Line, le.Size, maxBytes)})
		case errors.As(err, &le):
			return fail(invalidArgument(id, "%v", le))
		case err != nil:
			return fail(fmt.Errorf("read the events of session %q: %w", id, err))
		}
		if err := send(b); err != nil {
			return fail(err)
		}
	}
	offset := br.Offset()
	for len(inflight) > 0 {
		if err := settle(); err != nil {
			return fail(err)
		}
	}
	if res.Bytes < offset { // trailing blank lines
		res.Bytes = offset
		if progress != nil && res.Batches > 0 {
			progress(offset)
		}
	}
	return res, nil
}
