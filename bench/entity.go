package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/sessionflow/sessionflow/workflows"

	temporalclient "go.temporal.io/sdk/client"

	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// EntityResult is one side of the entity comparison.
type EntityResult struct {
	// Appends and Events are what was acknowledged.
	Appends int
	Events  int
	// Runs is the number of runs of the workflow id (continue-as-new
	// generations + 1); CANAtAppend the acknowledged appends before the
	// first continue-as-new, 0 if none.
	Runs        int
	CANAtAppend int
	// HistoryEvents and HistoryBytes sum every run's history.
	HistoryEvents int
	HistoryBytes  int
	// PerAppend is the mean latency of an append.
	PerAppend time.Duration
	// SyncTime is the mean time per append of the worker store's fsyncs
	// (a sessionflow session's; zero for the entity workflow, which has no
	// store), and Syncs their number in all.
	SyncTime time.Duration
	Syncs    int
	// Outcome says how the drive ended: the failure, or the cap reached.
	Outcome string
}

// BytesPerEvent is the history bytes per appended event.
func (r EntityResult) BytesPerEvent() float64 {
	if r.Events == 0 {
		return 0
	}
	return float64(r.HistoryBytes) / float64(r.Events)
}

// batch returns cfg.EntityBatch events from seq.
func (e *env) batch(seq int64) ([]session.Event, error) {
	out := make([]session.Event, e.cfg.EntityBatch)
	for i := range out {
		ev, err := event(seq+int64(i), e.cfg.EntityEventBytes)
		if err != nil {
			return nil, err
		}
		out[i] = ev
	}
	return out, nil
}

// entityComparison drives the entity workflow until it fails or reaches
// the cap, then sessionflow with as many appends.
func (e *env) entityComparison(ctx context.Context, res *Results) error {
	r, err := e.entityDrive(ctx, "entity-1", EntityState{}, e.cfg.EntityMaxAppends)
	if err != nil {
		return err
	}
	res.Entity = r
	e.log("  entity: %d appends, %d events, %d runs, CAN at %d, %.0f history B/event, %s per append; %s",
		r.Appends, r.Events, r.Runs, r.CANAtAppend, r.BytesPerEvent(), r.PerAppend, r.Outcome)

	// sessionflow, same appends.
	sr, err := e.sessionflowSameLoad(ctx, e.createReq("same-load", 0), max(1, min(r.Appends, e.cfg.SessionflowMaxAppends)))
	if err != nil {
		return err
	}
	res.SessionflowSameLoad = sr
	e.log("  sessionflow: %d appends, %d runs, %.0f history B/event, %s per append",
		sr.Appends, sr.Runs, sr.BytesPerEvent(), sr.PerAppend)
	return nil
}

func (e *env) sessionflowSameLoad(ctx context.Context, req wire.CreateSessionRequest, appends int) (EntityResult, error) {
	id := req.SessionID
	info, err := e.sf.Create(ctx, req)
	if err != nil {
		return EntityResult{}, err
	}
	var (
		r     EntityResult
		total time.Duration
	)
	seq := info.NextSeq
	syncs0, syncTime0 := e.syncs.read()
	for r.Appends < appends {
		evs, err := e.batch(seq)
		if err != nil {
			return r, err
		}
		t0 := time.Now()
		if _, err := e.sf.Append(ctx, id, session.WireEvents(evs)); err != nil {
			return r, fmt.Errorf("append %d: %w", r.Appends+1, err)
		}
		total += time.Since(t0)
		r.Appends++
		seq += int64(len(evs))
	}
	r.Events = int(seq - info.NextSeq)
	r.PerAppend = total / time.Duration(r.Appends)
	syncs1, syncTime1 := e.syncs.read()
	r.Syncs, r.SyncTime = syncs1-syncs0, (syncTime1-syncTime0)/time.Duration(r.Appends)
	if _, err := e.sf.Dispose(ctx, id); err != nil {
		return r, fmt.Errorf("dispose: %w", err)
	}
	runs, hev, hb, last, err := e.chain(ctx, info.WorkflowID, info.RunID)
	if err != nil {
		return r, err
	}
	r.Runs, r.HistoryEvents, r.HistoryBytes = runs, hev, hb
	r.Outcome = "completed, " + describeEnd(last)
	if runs > 1 {
		r.Outcome += fmt.Sprintf(" (continued as new %d times, carrying only the cursor)", runs-1)
	}
	return r, nil
}

// entityDrive starts an entity workflow wid from st and appends to it, one
// caller, until an append fails or limit were acknowledged; then it ends the
// workflow and reads its chain of runs.
func (e *env) entityDrive(ctx context.Context, wid string, st EntityState, limit int) (EntityResult, error) {
	run, err := e.tc.ExecuteWorkflow(ctx, temporalclient.StartWorkflowOptions{ID: wid, TaskQueue: taskQueue}, EntityWorkflowName, st)
	if err != nil {
		return EntityResult{}, fmt.Errorf("starting the entity: %w", err)
	}
	firstRun := run.GetRunID()
	var (
		r     EntityResult
		total time.Duration
		seq   int64
	)
	r.Outcome = fmt.Sprintf("cap of %d appends reached", limit)
	for r.Appends < limit {
		evs, err := e.batch(seq)
		if err != nil {
			return r, err
		}
		uctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		t0 := time.Now()
		h, err := e.tc.UpdateWorkflow(uctx, temporalclient.UpdateWorkflowOptions{
			WorkflowID:   wid,
			UpdateName:   wire.UpdateAppend,
			Args:         []any{workflows.AppendRequest{Events: evs}},
			WaitForStage: temporalclient.WorkflowUpdateStageCompleted,
		})
		var out wire.AppendResult
		if err == nil {
			err = h.Get(uctx, &out)
		}
		d := time.Since(t0)
		cancel()
		if err != nil {
			r.Outcome = fmt.Sprintf("append %d failed: %v", r.Appends+1, err)
			break
		}
		if h.RunID() != firstRun && r.CANAtAppend == 0 {
			r.CANAtAppend = r.Appends
		}
		total += d
		r.Appends++
		seq += int64(len(evs))
		if out.NextSeq != seq {
			return r, fmt.Errorf("entity holds %d events, %d appended", out.NextSeq, seq)
		}
	}
	r.Events = int(seq)
	if r.Appends > 0 {
		r.PerAppend = total / time.Duration(r.Appends)
	}
	// End it: done when it still answers, else terminate.
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_ = e.tc.SignalWorkflow(sctx, wid, "", EntitySignalDone, nil)
	cancel()
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err = e.tc.GetWorkflow(wctx, wid, "").Get(wctx, nil)
	cancel()
	if err != nil {
		_ = e.tc.TerminateWorkflow(ctx, wid, "", "bench: entity stuck")
	}
	runs, hev, hb, last, err := e.chain(ctx, wid, firstRun)
	if err != nil {
		return r, err
	}
	r.Runs, r.HistoryEvents, r.HistoryBytes = runs, hev, hb
	r.Outcome += "; last run: " + describeEnd(last)
	return r, nil
}
