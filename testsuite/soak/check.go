package soak

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// read reads a session's whole log through a read handle.
func (r *runner) read(ctx context.Context, id string) ([]session.Event, error) {
	h, err := r.reader.Open(ctx, id, jsonl.AccessRead, jsonl.OpenOptions{})
	if err != nil {
		return nil, err
	}
	events, err := h.Read(ctx, 0, -1)
	if cerr := h.Close(ctx); err == nil && cerr != nil {
		err = cerr
	}
	return events, err
}

// compare returns "" when got is byte-equal to want in canonical JSON, else
// both encodings.
func compare(want, got session.Event) string {
	w, werr := want.MarshalJSON()
	g, gerr := got.MarshalJSON()
	if werr != nil || gerr != nil {
		return fmt.Sprintf("encoding: %v %v", werr, gerr)
	}
	if !bytes.Equal(w, g) {
		return fmt.Sprintf("acked %s, stored %s", w, g)
	}
	return ""
}

// check reads every session from the store and compares it with what was
// acknowledged before the read. It returns the number of acknowledged
// events it checked.
func (r *runner) check(ctx context.Context, final bool) int64 {
	var total int64
	for _, t := range append(r.sessions[:len(r.sessions):len(r.sessions)], r.cycles.sessions(false)...) {
		acked := t.snapshot()
		total += int64(len(acked))
		events, err := r.read(ctx, t.id)
		if err != nil {
			r.rep.fail("session %s does not open for read (final=%v): %v", t.id, final, err)
			continue
		}
		stored := make(map[int64]session.Event, len(events))
		var dups []int64
		contiguous := true
		for i, e := range events {
			if _, seen := stored[e.Seq]; seen {
				dups = append(dups, e.Seq)
				continue
			}
			stored[e.Seq] = e
			if e.Seq != int64(i) {
				contiguous = false
			}
		}
		if !contiguous || len(dups) > 0 {
			seqs := make([]int64, len(events))
			for i, e := range events {
				seqs[i] = e.Seq
			}
			r.rep.fail("session %s: stored seqs are not 0..%d contiguous (duplicates %v): %v", t.id, len(events)-1, dups, abbreviate(seqs))
		}
		var lost []string
		for _, a := range acked {
			got, ok := stored[a.Seq]
			diff := "absent from the store"
			if ok {
				diff = compare(a, got)
			}
			if diff == "" {
				continue
			}
			t.mu.Lock()
			t.lost[a.Seq] = true
			t.mu.Unlock()
			lost = append(lost, fmt.Sprintf("seq %d %s", a.Seq, diff))
		}
		if len(lost) > 0 {
			r.rep.fail("session %s: %d acknowledged events lost (acked %d, stored %d): %s", t.id, len(lost), len(acked), len(events), strings.Join(firstN(lost, 5), "; "))
		}
		if len(dups) > 0 {
			t.mu.Lock()
			for _, s := range dups {
				t.dups[s] = true
			}
			t.mu.Unlock()
		}
	}
	return total
}

// disposeAndResume disposes every session, then resumes and disposes it
// again; it returns the number of sessions that could not be resumed.
func (r *runner) disposeAndResume(ctx context.Context) int {
	for _, t := range r.sessions {
		if err := r.dispose(ctx, t.id); err != nil {
			r.rep.fail("session %s: final dispose: %v", t.id, err)
		}
	}
	unresumable := r.resumeAndDispose(ctx, r.sessions, "session")
	r.rep.progress("%d sessions disposed, resumed and disposed again (%d unresumable)", len(r.sessions), unresumable)
	return unresumable
}

// dispose disposes a live session and waits until its workflow has closed.
func (r *runner) dispose(ctx context.Context, id string) error {
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if _, err := r.cl.Dispose(cctx, id); err != nil {
		return err
	}
	if err := r.tc.GetWorkflow(cctx, wire.WorkflowID(id), "").Get(cctx, nil); err != nil {
		return fmt.Errorf("the disposed workflow of session %s: %w", id, err)
	}
	return nil
}

// checkTaskTimeouts checks that the latest run of every appended-to
// session, after the continues-as-new its appends caused, still has the
// workflow task timeout the client started it with.
func (r *runner) checkTaskTimeouts(ctx context.Context) {
	want := r.cl.Options().WorkflowTaskTimeout
	if want <= 0 {
		return
	}
	runs := 0
	for _, t := range r.sessions {
		d, err := r.tc.DescribeWorkflow(ctx, wire.WorkflowID(t.id), "")
		if err != nil {
			r.rep.fail("session %s: describing its workflow: %v", t.id, err)
			continue
		}
		if d.RawResponse.GetWorkflowExecutionInfo().GetExecution().GetRunId() != d.RawResponse.GetWorkflowExecutionInfo().GetFirstRunId() {
			runs++
		}
		if got := d.RawResponse.GetExecutionConfig().GetDefaultWorkflowTaskTimeout().AsDuration(); got != want {
			r.rep.fail("session %s: its latest run's workflow task timeout is %v, not the %v it was started with", t.id, got, want)
		}
	}
	r.rep.progress("workflow task timeout %v kept by every session (%d of %d continued as new)", want, runs, len(r.sessions))
}

// checkLeases checks that no session's lease outlives its closed workflow.
func (r *runner) checkLeases(ctx context.Context) {
	ids := make([]string, 0, len(r.sessions)+len(r.turns.sessions))
	for _, t := range append(r.sessions[:len(r.sessions):len(r.sessions)], r.cycles.sessions(true)...) {
		ids = append(ids, t.id)
	}
	for _, t := range r.turns.sessions {
		ids = append(ids, t.id)
	}
	for _, id := range ids {
		l, err := r.reader.LeaseOf(ctx, id)
		switch {
		case err != nil:
			r.rep.fail("session %s: reading its lease: %v", id, err)
		case l != nil:
			r.rep.fail("session %s: lease still held after the final dispose: handle %s, owner %+v, pid %d", id, l.HandleID, l.Owner, l.PID)
		}
	}
}

func firstN(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], fmt.Sprintf("... %d more", len(s)-n))
	}
	return s
}

// abbreviate prints a seq list, eliding the middle of a long one.
func abbreviate(seqs []int64) string {
	if len(seqs) <= 40 {
		return fmt.Sprint(seqs)
	}
	return fmt.Sprintf("%v ... %v", seqs[:20], seqs[len(seqs)-20:])
}
