package bench

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	temporalclient "go.temporal.io/sdk/client"
	"google.golang.org/protobuf/proto"

	"github.com/sessionflow/sessionflow/provider"
)

// Patterns compared by the turn measurements.
const (
	// PatternSessionflow is a turn of a live sessionflow session: the
	// conversation stays in the session log.
	PatternSessionflow = "sessionflow"
	// PatternSample is a turn of the agent-sample workflow
	// (SampleWorkflow): the conversation travels through history.
	PatternSample = "agent sample"
)

// TurnsConfig sizes the turn measurements.
type TurnsConfig struct {
	// Enabled runs them.
	Enabled bool
	// Sizes are the conversation lengths (messages) measured for both
	// patterns, with responses of ResponseChunks chunks.
	Sizes []int
	// Chunks are the response lengths (chunks of ChunkBytes bytes) whose
	// history per turn is measured at the conversation length Sizes[0].
	Chunks     []int
	ChunkBytes int
	// ResponseChunks is the response length of the size measurements.
	ResponseChunks int
	// MessageBytes is the text of every message of a built conversation
	// and of every prompt.
	MessageBytes int
	// Turns is the number of measured turns per point (after Warmup
	// turns); the medians are reported.
	Turns  int
	Warmup int
	// SessionTurns is the number of turns of the long sessionflow run on
	// one session.
	SessionTurns int
	// GrowBatch is the number of messages each turn of the sample's growth
	// run adds besides its prompt and answer; GrowMaxMessages ends the
	// run if no limit did.
	GrowBatch       int
	GrowMaxMessages int
}

// DefaultTurnsConfig returns the sizes of the documented run.
func DefaultTurnsConfig() TurnsConfig {
	return TurnsConfig{
		Enabled:         true,
		Sizes:           []int{10, 100, 1_000, 10_000},
		Chunks:          []int{10, 100_000},
		ChunkBytes:      4,
		ResponseChunks:  10,
		MessageBytes:    100,
		Turns:           11,
		Warmup:          2,
		SessionTurns:    500,
		GrowBatch:       500,
		GrowMaxMessages: 1_000_000,
	}
}

// LongSessionTurns is the number of turns of the long sessionflow run
// (-turns-long).
const LongSessionTurns = 10_000

// TurnPoint is one pattern's turns at one conversation and response
// length.
type TurnPoint struct {
	// Pattern is PatternSessionflow or PatternSample.
	Pattern string
	// Messages is the conversation's length before the first measured
	// turn; Chunks the response's length.
	Messages int
	Chunks   int
	// HistoryBytes and HistoryEvents are the medians, over the measured
	// turns, of what one turn added to its run's history (the encoded
	// size of the events, a continue-as-new event excepted).
	HistoryBytes  int
	HistoryEvents int
	// Time is the duration of a turn, from the request until its end is
	// seen by the client.
	Time Stats
	// Parts are where a turn's time went, by part (an activity type from
	// its scheduling to its completion, or the workflow tasks from their
	// scheduling to their completion), in order of first occurrence.
	Parts []TurnPart
	// Measured is the number of measured turns.
	Measured int
	// Ended is why the turns stopped before Turns were measured; Err is
	// why none could be measured. Both are empty when every turn ran.
	Ended string
	Err   string
}

// TurnPart is one part of a turn's time: Count occurrences in a turn
// taking Median in all (medians over the measured turns).
type TurnPart struct {
	Name   string
	Count  int
	Median time.Duration
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

// LongRun is sessionflow's long run: many turns on one session.
type LongRun struct {
	// Turns is the number of completed turns, Messages the conversation's
	// length at the end.
	Turns    int
	Messages int
	// Runs is the number of runs of the session's workflow id
	// (continue-as-new generations + 1) during the turns.
	Runs int
	// MaxRunBytes and MaxRunEvents are the largest history of one run.
	MaxRunBytes  int
	MaxRunEvents int
	// FirstTurnBytes and LastTurnBytes are the history of the first and
	// the last turn.
	FirstTurnBytes int
	LastTurnBytes  int
	// Time is the duration of a turn over all turns; FirstTime and
	// LastTime the medians of the first and the last tenth of them.
	Time      Stats
	FirstTime time.Duration
	LastTime  time.Duration
	Elapsed   time.Duration
	// Outcome says how it ended.
	Outcome string
}

// GrowRun is the sample's growth run: turns on one workflow until a limit
// ends it.
type GrowRun struct {
	// Turns is the number of completed turns; Messages the conversation's
	// length after the last of them.
	Turns    int
	Messages int
	// FailedAt is the conversation's length the failed turn would have
	// reached (its prompt and added messages in); 0 when none failed.
	FailedAt int
	// Runs is the number of runs of the workflow id.
	Runs int
	// HistoryBytes sums every run's history; LastTurnBytes is what the
	// last completed turn added to its run.
	HistoryBytes  int
	LastTurnBytes int
	// Outcome is the failure, or the cap reached.
	Outcome string
	Elapsed time.Duration
}

// TurnResults are the turn measurements of one run.
type TurnResults struct {
	// Config is their configuration.
	Config TurnsConfig
	// BySize holds, per pattern, one point per conversation length.
	BySize map[string][]TurnPoint
	// ByChunks holds, per pattern, one point per response length.
	ByChunks map[string][]TurnPoint
	// Long is sessionflow's long run; Grow the sample's growth run.
	Long LongRun
	Grow GrowRun
	// Missing names what could not be measured and why.
	Missing []string
	// Started, Elapsed and the 1-minute load averages before and after
	// the turn measurements.
	Started    time.Time
	Elapsed    time.Duration
	LoadBefore float64
	LoadAfter  float64
}

// Point returns pattern's point of the size measurements at messages, if
// measured.
func (r *TurnResults) Point(pattern string, messages int) (TurnPoint, bool) {
	return find(r.BySize[pattern], messages, r.Config.ResponseChunks)
}

// ChunkPoint returns pattern's point of the response-length measurements
// at chunks, if measured.
func (r *TurnResults) ChunkPoint(pattern string, chunks int) (TurnPoint, bool) {
	if len(r.Config.Sizes) == 0 {
		return TurnPoint{}, false
	}
	return find(r.ByChunks[pattern], r.Config.Sizes[0], chunks)
}

func find(points []TurnPoint, messages, chunks int) (TurnPoint, bool) {
	for _, p := range points {
		if p.Messages == messages && p.Chunks == chunks && p.Err == "" {
			return p, true
		}
	}
	return TurnPoint{}, false
}

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
	p := TurnPoint{Pattern: pattern, Messages: n, Chunks: chunks}
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

// turns runs every turn measurement.
func (e *env) turns(ctx context.Context, res *Results) error {
	cfg := e.cfg.Turns
	tr := &TurnResults{Config: cfg, BySize: map[string][]TurnPoint{}, ByChunks: map[string][]TurnPoint{},
		Started: time.Now(), LoadBefore: LoadAverage()}
	res.Turns = tr
	defer func() {
		tr.Elapsed = time.Since(tr.Started)
		tr.LoadAfter = LoadAverage()
	}()
	drivers := map[string]turnDriver{PatternSample: &sampleDriver{e: e}}
	if d, err := e.sessionflowDriver(); err != nil {
		tr.Missing = append(tr.Missing, fmt.Sprintf("sessionflow turns: %v", err))
	} else {
		drivers[PatternSessionflow] = d
	}
	for _, pattern := range []string{PatternSessionflow, PatternSample} {
		d, ok := drivers[pattern]
		if !ok {
			continue
		}
		for _, n := range cfg.Sizes {
			p := e.point(ctx, d, pattern, fmt.Sprintf("size-%d", n), n, cfg.ResponseChunks)
			e.log("  %s, %d messages: %d history bytes (%d events) per turn, %s per turn%s", pattern, n, p.HistoryBytes, p.HistoryEvents, ms(p.Time.Median), errSuffix(p))
			tr.BySize[pattern] = append(tr.BySize[pattern], p)
		}
		n := cfg.Sizes[0]
		for _, c := range cfg.Chunks {
			p := e.point(ctx, d, pattern, fmt.Sprintf("chunks-%d", c), n, c)
			e.log("  %s, %d-chunk responses: %d history bytes (%d events) per turn, %s per turn%s", pattern, c, p.HistoryBytes, p.HistoryEvents, ms(p.Time.Median), errSuffix(p))
			tr.ByChunks[pattern] = append(tr.ByChunks[pattern], p)
		}
	}
	if err := e.growSample(ctx, tr); err != nil {
		return fmt.Errorf("the sample's growth run: %w", err)
	}
	e.log("  sample growth: %d turns, %d messages, %d runs; %s", tr.Grow.Turns, tr.Grow.Messages, tr.Grow.Runs, tr.Grow.Outcome)
	if d, ok := drivers[PatternSessionflow]; ok {
		if err := e.longRun(ctx, d, tr); err != nil {
			return fmt.Errorf("the long sessionflow run: %w", err)
		}
		e.log("  sessionflow long run: %d turns, %d runs, largest run %d bytes; %s", tr.Long.Turns, tr.Long.Runs, tr.Long.MaxRunBytes, tr.Long.Outcome)
	}
	return nil
}

func errSuffix(p TurnPoint) string {
	switch {
	case p.Err != "":
		return "; failed: " + p.Err
	case p.Ended != "":
		return fmt.Sprintf("; %d turns measured, then %s", p.Measured, p.Ended)
	}
	return ""
}

// growSample drives one sample workflow, each turn adding GrowBatch
// messages, its prompt and its answer, until a turn fails.
func (e *env) growSample(ctx context.Context, tr *TurnResults) error {
	cfg := e.cfg.Turns
	d := &sampleDriver{e: e}
	if err := d.open(ctx, "grow", 0, cfg.ResponseChunks); err != nil {
		return err
	}
	first := d.runID
	g := &tr.Grow
	g.Outcome = fmt.Sprintf("cap of %d messages reached", cfg.GrowMaxMessages)
	t0 := time.Now()
	for g.Messages < cfg.GrowMaxMessages {
		batch := Conversation(cfg.GrowBatch, cfg.MessageBytes)
		runID, evs, err := e.quiet(ctx, d.wid)
		if err != nil {
			return err
		}
		d.extra = batch
		err = d.turn(ctx, messageText(g.Messages, cfg.MessageBytes))
		d.extra = nil
		if err != nil {
			g.FailedAt = g.Messages + len(batch) + 1
			g.Outcome = fmt.Sprintf("turn %d failed: %v", g.Turns+1, err)
			break
		}
		g.Turns++
		g.Messages = d.messages
		if _, _, err := e.quiet(ctx, d.wid); err != nil {
			return err
		}
		after, _, err := e.history(ctx, d.wid, runID)
		if err != nil {
			return err
		}
		_, g.LastTurnBytes = turnCost(after, len(evs))
	}
	g.Elapsed = time.Since(t0)
	_ = d.close(ctx)
	runs, _, b, last, err := e.chain(ctx, d.wid, first)
	if err != nil {
		return err
	}
	g.Runs, g.HistoryBytes = runs, b
	g.Outcome += "; last run: " + describeEnd(last)
	return nil
}

// longRun runs SessionTurns turns on one new sessionflow session.
func (e *env) longRun(ctx context.Context, d turnDriver, tr *TurnResults) error {
	cfg := e.cfg.Turns
	l := &tr.Long
	if err := d.open(ctx, "long", 0, cfg.ResponseChunks); err != nil {
		return err
	}
	first, _, err := e.quiet(ctx, d.workflowID())
	if err != nil {
		return err
	}
	var times []time.Duration
	t0 := time.Now()
	l.Outcome = fmt.Sprintf("%d turns completed", cfg.SessionTurns)
	for i := 0; i < cfg.SessionTurns; i++ {
		// Reading a run's history costs time growing with the run, so only
		// the first and the last turn are weighed; every turn is timed.
		prompt := messageText(2*i, cfg.MessageBytes)
		var (
			el  time.Duration
			b   int
			err error
		)
		if i == 0 || i == cfg.SessionTurns-1 {
			el, _, b, _, err = e.measuredTurn(ctx, d, prompt)
		} else {
			t1 := time.Now()
			err = d.turn(ctx, prompt)
			el = time.Since(t1)
		}
		if err != nil {
			l.Outcome = fmt.Sprintf("turn %d failed: %v", i+1, err)
			break
		}
		if i == 0 {
			l.FirstTurnBytes = b
		}
		l.LastTurnBytes = b
		times = append(times, el)
		l.Turns++
		if (i+1)%1000 == 0 {
			e.log("  sessionflow long run: %d turns, %s per turn", i+1, ms(el))
		}
	}
	l.Elapsed = time.Since(t0)
	l.Messages = 2 * l.Turns
	l.Time = summarize(times)
	if k := len(times) / 10; k > 0 {
		l.FirstTime = summarize(times[:k]).Median
		l.LastTime = summarize(times[len(times)-k:]).Median
	}
	if err := d.close(ctx); err != nil {
		return err
	}
	for runID := first; runID != ""; {
		evs, b, err := e.history(ctx, d.workflowID(), runID)
		if err != nil {
			return err
		}
		l.Runs++
		l.MaxRunBytes = max(l.MaxRunBytes, b)
		l.MaxRunEvents = max(l.MaxRunEvents, len(evs))
		runID = ""
		if n := len(evs); n > 0 {
			if a := evs[n-1].GetWorkflowExecutionContinuedAsNewEventAttributes(); a != nil {
				runID = a.GetNewExecutionRunId()
			}
		}
	}
	return nil
}

// sampleDriver runs turns of the agent-sample workflow.
type sampleDriver struct {
	e        *env
	wid      string
	runID    string
	messages int
	// extra are messages the next turn adds before its prompt.
	extra []provider.Message
}

func (s *sampleDriver) workflowID() string { return s.wid }

func (s *sampleDriver) open(ctx context.Context, name string, n, chunks int) error {
	s.wid = "sample-" + name
	s.messages = n
	run, err := s.e.tc.ExecuteWorkflow(ctx, temporalclient.StartWorkflowOptions{ID: s.wid, TaskQueue: taskQueue}, SampleWorkflowName,
		SampleState{Provider: providerName(chunks), Model: "bench", Messages: Conversation(n, s.e.cfg.Turns.MessageBytes)})
	if err != nil {
		return fmt.Errorf("starting %s: %w", s.wid, err)
	}
	s.runID = run.GetRunID()
	return nil
}

func (s *sampleDriver) turn(ctx context.Context, prompt string) error {
	uctx, cancel := context.WithTimeout(ctx, sampleTimeout)
	defer cancel()
	h, err := s.e.tc.UpdateWorkflow(uctx, temporalclient.UpdateWorkflowOptions{
		WorkflowID:   s.wid,
		UpdateName:   SampleUpdateTurn,
		Args:         []any{SampleTurnRequest{Messages: s.extra, Prompt: prompt}},
		WaitForStage: temporalclient.WorkflowUpdateStageCompleted,
	})
	var out SampleTurnResult
	if err == nil {
		err = h.Get(uctx, &out)
	}
	if err != nil {
		return err
	}
	if want := s.messages + len(s.extra) + 2; out.Messages != want {
		return fmt.Errorf("the conversation holds %d messages after the turn, want %d", out.Messages, want)
	}
	s.messages = out.Messages
	return nil
}

func (s *sampleDriver) close(ctx context.Context) error {
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := s.e.tc.SignalWorkflow(sctx, s.wid, "", SampleSignalDone, nil); err == nil {
		if err := s.e.tc.GetWorkflow(sctx, s.wid, "").Get(sctx, nil); err == nil {
			return nil
		}
	}
	// A workflow that no longer answers (a limit failed it) is ended; one
	// the server already closed refuses the termination, which is fine.
	_ = s.e.tc.TerminateWorkflow(ctx, s.wid, "", "bench: sample ended")
	return nil
}
