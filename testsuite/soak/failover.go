package soak

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
)

// Failover are the figures of the soak's kills: how long the sessions took
// to append again after each kill, and the workflow tasks that timed out.
type Failover struct {
	// Recoveries holds, for every kill after which every session had a
	// batch acknowledged within Config.RecoveryTimeout, the time from the
	// SIGKILL until the last of them did (the restart of the worker
	// included). Empty with Config.Eager.
	Recoveries []time.Duration
	// Unrecovered counts the kills after which some session had no batch
	// acknowledged within Config.RecoveryTimeout.
	Unrecovered int
	// KilledStartToClose counts the workflow tasks a killed worker had
	// started and never completed: they time out by design.
	KilledStartToClose int
	// KilledSticky counts the workflow tasks that waited on a killed
	// worker's sticky queue until the sticky timeout: they time out by
	// design too.
	KilledSticky int
	// Other counts every other workflow task timeout: a task that a live
	// worker held longer than the workflow task timeout or left on its
	// sticky queue longer than the sticky timeout.
	Other int
	// OtherTimeouts describes the first of them.
	OtherTimeouts []string
}

// Percentile returns the p-th percentile (0 < p <= 1, nearest rank) of the
// recoveries, 0 without any.
func (f Failover) Percentile(p float64) time.Duration {
	if len(f.Recoveries) == 0 {
		return 0
	}
	s := slices.Clone(f.Recoveries)
	slices.Sort(s)
	i := int(p*float64(len(s))+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// String returns the failover line of the summary.
func (f Failover) String() string {
	ms := func(d time.Duration) string { return fmt.Sprintf("%.2fs", d.Seconds()) }
	return fmt.Sprintf("failover: recovered=%d unrecovered=%d median=%s p90=%s max=%s; workflow task timeouts: killed-worker start-to-close=%d killed-worker sticky=%d other=%d",
		len(f.Recoveries), f.Unrecovered, ms(f.Percentile(0.5)), ms(f.Percentile(0.9)), ms(f.Percentile(1)),
		f.KilledStartToClose, f.KilledSticky, f.Other)
}

// taskTimeouts reads the history of every workflow run of the namespace and
// classifies its WorkflowTaskTimedOut events: a start-to-close timeout of a
// task started by a worker (the identity of the started event, or for a
// speculative task, written without it, the sticky queue's owner) that was
// killed before the timeout, a
// schedule-to-start timeout of a task scheduled on the sticky queue of a
// worker (the one that completed the run's previous task) that was killed
// before the timeout, or another.
func (r *runner) taskTimeouts(ctx context.Context, f *Failover) error {
	var token []byte
	for {
		resp, err := r.tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: r.namespace, PageSize: 200, NextPageToken: token,
		})
		if err != nil {
			return fmt.Errorf("listing the workflow runs: %w", err)
		}
		for _, e := range resp.GetExecutions() {
			ex := e.GetExecution()
			var events []*historypb.HistoryEvent
			it := r.tc.GetWorkflowHistory(ctx, ex.GetWorkflowId(), ex.GetRunId(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
			for it.HasNext() {
				ev, err := it.Next()
				if err != nil {
					return fmt.Errorf("reading the history of %s/%s: %w", ex.GetWorkflowId(), ex.GetRunId(), err)
				}
				events = append(events, ev)
			}
			r.classifyTimeouts(ex.GetWorkflowId(), events, f)
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return nil
		}
	}
}

// classifyTimeouts counts the workflow task timeouts of one run's history.
func (r *runner) classifyTimeouts(workflowID string, events []*historypb.HistoryEvent, f *Failover) {
	startedBy := map[int64]string{}
	lastCompletedBy := ""
	for _, ev := range events {
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED:
			startedBy[ev.GetEventId()] = ev.GetWorkflowTaskStartedEventAttributes().GetIdentity()
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			lastCompletedBy = ev.GetWorkflowTaskCompletedEventAttributes().GetIdentity()
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
			a := ev.GetWorkflowTaskTimedOutEventAttributes()
			at := ev.GetEventTime().AsTime()
			who := lastCompletedBy
			switch a.GetTimeoutType() {
			case enumspb.TIMEOUT_TYPE_START_TO_CLOSE:
				// A speculative task (an update's) is written with its
				// started event when it times out, without the identity
				// of the worker that took it: the sticky queue's owner.
				if id := startedBy[a.GetStartedEventId()]; id != "" {
					who = id
				}
				if r.fleet.killedBefore(who, at) {
					f.KilledStartToClose++
					continue
				}
			case enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START:
				if r.fleet.killedBefore(who, at) {
					f.KilledSticky++
					continue
				}
			}
			f.Other++
			if len(f.OtherTimeouts) < 10 {
				f.OtherTimeouts = append(f.OtherTimeouts, fmt.Sprintf("%s event %d: %s timeout at %s of a task of %q",
					workflowID, ev.GetEventId(), strings.ToLower(a.GetTimeoutType().String()), at.Format(time.RFC3339Nano), who))
			}
		}
	}
}
