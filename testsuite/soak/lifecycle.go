package soak

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/sessionflow/sessionflow/wire"
)

// cycler owns the sessions of the lifecycle loops: each loop takes new
// sessions through create, appends, dispose and resume during the kills;
// the checks read those whose lifecycle is over.
type cycler struct {
	r *runner

	mu  sync.Mutex
	all []*tracked
}

// loop takes new sessions, one after another until stop closes,
// through create, one to three appends, dispose, resume, one append and
// dispose, each step retried or awaited across the kills. A step that does
// not complete within the batch deadline is a failure and ends the loop.
func (c *cycler) loop(ctx context.Context, loop int, rng *rand.Rand, stop <-chan struct{}) {
	for n := 0; ; n++ {
		if stopped(ctx, stop) {
			return
		}
		t := newTracked(fmt.Sprintf("soak-%d-l%d-%04d", c.r.cfg.Seed, loop, n))
		c.mu.Lock()
		c.all = append(c.all, t)
		c.mu.Unlock()
		if err := c.lifecycle(ctx, t, rng); err != nil {
			if ctx.Err() == nil {
				c.r.rep.fail("session %s: lifecycle: %v", t.id, err)
			}
			return
		}
		t.mu.Lock()
		t.done = true
		t.mu.Unlock()
	}
}

// lifecycle runs one session's lifecycle (see loop).
func (c *cycler) lifecycle(ctx context.Context, t *tracked, rng *rand.Rand) error {
	cctx, cancel := context.WithTimeout(ctx, c.r.cfg.BatchDeadline)
	_, err := c.r.cl.Create(cctx, wire.CreateSessionRequest{SessionID: t.id, Options: c.r.options()})
	cancel()
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	for i := 1 + rng.Intn(3); i > 0; i-- {
		if !c.r.appendBatch(ctx, t, rng) {
			return errors.New("append not acknowledged")
		}
	}
	if err := c.r.disposeUntilClosed(ctx, t.id); err != nil {
		return err
	}
	if err := c.r.leaseReleased(ctx, t.id); err != nil {
		return err
	}
	cctx, cancel = context.WithTimeout(ctx, c.r.cfg.BatchDeadline)
	live, err := c.r.cl.Resume(cctx, t.id, wire.ResumeSessionRequest{Options: c.r.options()})
	cancel()
	if err != nil {
		return fmt.Errorf("resume: %w", err)
	}
	if err := t.resumed(live.NextSeq); err != nil {
		return err
	}
	if !c.r.appendBatch(ctx, t, rng) {
		return errors.New("append after the resume not acknowledged")
	}
	if err := c.r.disposeUntilClosed(ctx, t.id); err != nil {
		return err
	}
	return c.r.leaseReleased(ctx, t.id)
}

// disposeUntilClosed disposes the live session id and waits until its
// workflow has completed, asking again while a kill loses the request,
// until the batch deadline.
func (r *runner) disposeUntilClosed(ctx context.Context, id string) error {
	deadline := time.Now().Add(r.cfg.BatchDeadline)
	for {
		err := r.dispose(ctx, id)
		if err == nil {
			return nil
		}
		status, derr := r.status(ctx, id)
		switch {
		case derr == nil && status == enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
			return nil // an earlier attempt's dispose completed it
		case derr == nil && status != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
			return fmt.Errorf("dispose: the workflow ended %v: %w", status, err)
		case ctx.Err() != nil:
			return ctx.Err()
		case time.Now().After(deadline):
			return fmt.Errorf("dispose not done within %v: %w", r.cfg.BatchDeadline, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// status returns the status of the latest run of session id's workflow.
func (r *runner) status(ctx context.Context, id string) (enumspb.WorkflowExecutionStatus, error) {
	d, err := r.tc.DescribeWorkflow(ctx, wire.WorkflowID(id), "")
	if err != nil {
		return 0, err
	}
	return d.RawResponse.GetWorkflowExecutionInfo().GetStatus(), nil
}

// leaseReleased checks that session id's lease is gone (its workflow has
// completed).
func (r *runner) leaseReleased(ctx context.Context, id string) error {
	l, err := r.reader.LeaseOf(ctx, id)
	switch {
	case err != nil:
		return fmt.Errorf("reading the lease: %w", err)
	case l != nil:
		return fmt.Errorf("lease still held after the dispose: handle %s, owner %+v, pid %d", l.HandleID, l.Owner, l.PID)
	}
	return nil
}

// sessions returns the lifecycle sessions, only those whose lifecycle
// is over unless all is set.
func (c *cycler) sessions(all bool) []*tracked {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*tracked
	for _, t := range c.all {
		if all || t.isDone() {
			out = append(out, t)
		}
	}
	return out
}

// resume resumes and disposes every lifecycle session whose
// lifecycle completed; it returns the number that could not be resumed.
func (c *cycler) resume(ctx context.Context) int {
	cycled := c.sessions(false)
	unresumable := c.r.resumeAndDispose(ctx, cycled, "lifecycle session")
	c.r.rep.progress("%d lifecycle sessions resumed and disposed again (%d unresumable)", len(cycled), unresumable)
	return unresumable
}

// resumeAndDispose resumes and disposes each of sessions (kind names them
// in failures); it returns the number that could not be resumed.
func (r *runner) resumeAndDispose(ctx context.Context, sessions []*tracked, kind string) int {
	unresumable := 0
	for _, t := range sessions {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		_, err := r.cl.Resume(cctx, t.id, wire.ResumeSessionRequest{Options: r.options()})
		cancel()
		if err == nil {
			err = r.dispose(ctx, t.id)
		}
		if err != nil {
			unresumable++
			r.rep.fail("%s %s is unresumable: %v", kind, t.id, err)
		}
	}
	return unresumable
}
