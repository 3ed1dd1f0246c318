package bench

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"google.golang.org/protobuf/proto"
)

// turnDriver runs turns of one pattern.
type turnDriver interface {
	// open prepares a conversation of n messages whose model answers
	// with responses of chunks chunks, under the workflow id it returns.
	open(ctx context.Context, name string, n, chunks int) error
	// turn runs one turn and returns once the client sees its end.
	turn(ctx context.Context, prompt string) error
	// workflowID is the workflow the turns run in.
	workflowID() string
	// close ends the workflow.
	close(ctx context.Context) error
}

// quiet returns the latest run of workflowID and its history once it is
// at rest: closed, or without a pending workflow task or activity.
func (e *env) quiet(ctx context.Context, workflowID string) (string, []*historypb.HistoryEvent, error) {
	for i := 0; ; i++ {
		desc, err := e.tc.DescribeWorkflow(ctx, workflowID, "")
		if err != nil {
			return "", nil, fmt.Errorf("describing %s: %w", workflowID, err)
		}
		d := desc.RawResponse
		info := d.GetWorkflowExecutionInfo()
		if info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING || (d.GetPendingWorkflowTask() == nil && len(d.GetPendingActivities()) == 0) {
			runID := info.GetExecution().GetRunId()
			evs, _, err := e.history(ctx, workflowID, runID)
			return runID, evs, err
		}
		if i >= 2000 {
			return "", nil, fmt.Errorf("the history of %s did not come to rest", workflowID)
		}
		select {
		case <-ctx.Done():
			return "", nil, ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// turnCost is what a turn added to the history of the run it started in,
// from pos; a continue-as-new event is not counted (the state it carries
// is the next run's start).
func turnCost(evs []*historypb.HistoryEvent, from int) (events, bytes int) {
	for _, ev := range evs[min(from, len(evs)):] {
		if ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW {
			continue
		}
		events++
		bytes += proto.Size(ev)
	}
	return events, bytes
}

// measuredTurn runs one turn of d and returns its duration and what it
// added to its run's history.
func (e *env) measuredTurn(ctx context.Context, d turnDriver, prompt string) (time.Duration, int, int, []TurnPart, error) {
	runID, evs, err := e.quiet(ctx, d.workflowID())
	if err != nil {
		return 0, 0, 0, nil, err
	}
	from := len(evs)
	t0 := time.Now()
	if err := d.turn(ctx, prompt); err != nil {
		return 0, 0, 0, nil, err
	}
	el := time.Since(t0)
	if _, _, err := e.quiet(ctx, d.workflowID()); err != nil {
		return 0, 0, 0, nil, err
	}
	after, _, err := e.history(ctx, d.workflowID(), runID)
	if err != nil {
		return 0, 0, 0, nil, err
	}
	events, bytes := turnCost(after, from)
	return el, events, bytes, turnParts(after[min(from, len(after)):]), nil
}

// point opens a conversation of n messages for d and measures its turns.
func (e *env) point(ctx context.Context, d turnDriver, pattern, name string, n, chunks int) TurnPoint {
	p := TurnPoint{Pattern: pattern, Messages: n, Chunks: chunks, Load: LoadAverage()}
	cfg := e.cfg.Turns
	if err := d.open(ctx, name, n, chunks); err != nil {
		p.Err = err.Error()
		return p
	}
	defer func() { _ = d.close(ctx) }()
	var (
		times          []time.Duration
		events, bytess []int
		parts          [][]TurnPart
	)
	for i := 0; i < cfg.Warmup+cfg.Turns; i++ {
		el, ev, b, pp, err := e.measuredTurn(ctx, d, messageText(n+2*i, cfg.MessageBytes))
		if err != nil {
			msg := fmt.Sprintf("turn %d (messages before it: %d) failed: %v", i+1, n+2*i, err)
			if evs, _, herr := e.history(ctx, d.workflowID(), ""); herr == nil {
				msg += "; the run: " + describeEnd(evs)
			}
			if len(times) == 0 {
				p.Err = msg
				return p
			}
			p.Ended = msg
			break
		}
		if i >= cfg.Warmup {
			times = append(times, el)
			events = append(events, ev)
			bytess = append(bytess, b)
			parts = append(parts, pp)
		}
	}
	p.Measured = len(times)
	p.Parts = medianParts(parts)
	p.Time = summarize(times)
	p.HistoryEvents = medianInt(events)
	p.HistoryBytes = medianInt(bytess)
	return p
}

func medianInt(vs []int) int {
	if len(vs) == 0 {
		return 0
	}
	s := append([]int(nil), vs...)
	sort.Ints(s)
	return s[len(s)/2]
}

// workflowTasks names the workflow tasks among a turn's parts.
const workflowTasks = "workflow tasks"

// turnParts returns the time a turn's events spent per activity type
// (scheduled to completed) and in workflow tasks (scheduled to
// completed), in order of first occurrence.
func turnParts(evs []*historypb.HistoryEvent) []TurnPart {
	type open struct {
		name string
		at   time.Time
	}
	scheduled := map[int64]open{}
	var parts []TurnPart
	add := func(name string, d time.Duration) {
		for i := range parts {
			if parts[i].Name == name {
				parts[i].Count++
				parts[i].Median += d
				return
			}
		}
		parts = append(parts, TurnPart{Name: name, Count: 1, Median: d})
	}
	for _, ev := range evs {
		at := ev.GetEventTime().AsTime()
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			scheduled[ev.GetEventId()] = open{ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName(), at}
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED:
			scheduled[ev.GetEventId()] = open{workflowTasks, at}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			if o, ok := scheduled[ev.GetActivityTaskCompletedEventAttributes().GetScheduledEventId()]; ok {
				add(o.name, at.Sub(o.at))
			}
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			if o, ok := scheduled[ev.GetWorkflowTaskCompletedEventAttributes().GetScheduledEventId()]; ok {
				add(o.name, at.Sub(o.at))
			}
		}
	}
	return parts
}

// medianParts returns, per part, the median count and time over turns.
func medianParts(turns [][]TurnPart) []TurnPart {
	var out []TurnPart
	for _, t := range turns {
		for _, p := range t {
			if !slices.ContainsFunc(out, func(q TurnPart) bool { return q.Name == p.Name }) {
				out = append(out, TurnPart{Name: p.Name})
			}
		}
	}
	for i := range out {
		var counts []int
		var times []time.Duration
		for _, t := range turns {
			var c int
			var d time.Duration
			for _, p := range t {
				if p.Name == out[i].Name {
					c, d = p.Count, p.Median
				}
			}
			counts = append(counts, c)
			times = append(times, d)
		}
		out[i].Count = medianInt(counts)
		out[i].Median = summarize(times).Median
	}
	return out
}
