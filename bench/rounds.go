package bench

import (
	"context"
	"fmt"
	"slices"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"google.golang.org/protobuf/proto"

	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/wire"
)

// RoundsConfig sizes the tool-round measurements: turns whose model asks
// for tool calls of a no-op tool, then answers.
type RoundsConfig struct {
	// Enabled runs them with the turn measurements; Only runs them alone
	// (no turn measurement, no growth or long run).
	Enabled bool
	Only    bool
	// Sizes are the conversation lengths (messages) of the rounds of one
	// tool call.
	Sizes []int
	// Parallel are the numbers of parallel tool calls of the rounds
	// measured at the conversation length Sizes[0].
	Parallel []int
	// Rounds is the number of measured rounds per point. They run on
	// conversations of the point's length, each taking Warmup rounds, then
	// PerConversation measured ones (0: all of them), so that a round sees
	// at most 4 x (Warmup + PerConversation - 1) more messages than the
	// point's length (a round adds the prompt, the tool calls, their
	// results and the answer).
	Rounds          int
	Warmup          int
	PerConversation int
	// TimeOnly times the rounds without reading the history (no history,
	// parts or segments are measured): a profile of the rounds then holds
	// no history read of the harness, on either side of the server.
	TimeOnly bool
	// Patterns restricts the patterns measured (PatternSessionflow,
	// PatternSample, PatternSessionflowNoSync); empty measures all. A
	// profile of one pattern's round leaves the others out.
	Patterns []string
	// NoSyncFloor also measures, at the first size with one call,
	// sessionflow's rounds with its store's fsyncs counted but not made
	// (PatternSessionflowNoSync): how far the round is from the sample's
	// once the fsyncs the crash rules require are taken out.
	NoSyncFloor bool
}

// DefaultRoundsConfig returns the sizes of the documented run.
func DefaultRoundsConfig() RoundsConfig {
	return RoundsConfig{
		Enabled:         true,
		Sizes:           []int{10, 1_000, 10_000},
		Parallel:        []int{1, 4, 16},
		Rounds:          40,
		Warmup:          1,
		PerConversation: 5,
		NoSyncFloor:     true,
	}
}

// callCounts are the numbers of parallel calls of the measured rounds: 1
// and Parallel.
func (c RoundsConfig) callCounts() []int {
	out := []int{1}
	for _, k := range c.Parallel {
		if k > 0 && !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// patterns are the patterns measured at k, in order: sessionflow's and the
// sample's, and at the first size with one call the floor
// (NoSyncFloor).
func (c RoundsConfig) patterns(k roundKey) []string {
	all := []string{PatternSessionflow, PatternSample}
	if c.NoSyncFloor && len(c.Sizes) > 0 && k == (roundKey{c.Sizes[0], 1}) {
		all = append(all, PatternSessionflowNoSync)
	}
	var out []string
	for _, p := range all {
		if len(c.Patterns) == 0 || slices.Contains(c.Patterns, p) {
			out = append(out, p)
		}
	}
	return out
}

// RoundPoint is one pattern's tool rounds at one conversation length and
// number of parallel calls.
type RoundPoint struct {
	// Pattern is PatternSessionflow or PatternSample.
	Pattern string
	// Messages is the conversation's length before the first measured
	// turn; Calls the parallel tool calls of a round.
	Messages int
	Calls    int
	// Time is the round as the model sees it: from the end of the model
	// call that asked for the tools (its finish chunk taken) to the start
	// of the call that gets their results, timed by the provider.
	Time Stats
	// TurnTime is the turn holding the round, from the request until the
	// client sees its end.
	TurnTime Stats
	// HistoryBytes and HistoryEvents are the medians of the history of a
	// round: the events from the first model activity's completion to the
	// second one's scheduling, both included (the encoded size of the
	// events).
	HistoryBytes  int
	HistoryEvents int
	// TurnBytes and TurnEvents are the medians of what the whole turn added
	// to its run's history, a continue-as-new event excepted.
	TurnBytes  int
	TurnEvents int
	// Parts are where a round's time went on the server's clock, by part
	// (as TurnPoint.Parts), within the round's events.
	Parts []TurnPart
	// Segments split the round's time between the two model calls, on
	// the clock of the machine the worker and the server share (medians,
	// in order): see roundSegments.
	Segments []TurnPart
	// Syncs and SyncTime are the medians of the worker's store's fsyncs
	// during a round (on the provider's clock) and of their time.
	Syncs    int
	SyncTime time.Duration
	// CPU and ServerCPU are the mean CPU time (user and system) of a turn
	// holding one round, from its request until the client sees its end:
	// of the harness's process (the worker, the clients and the model
	// provider) and of the dev server's. Zero when not read.
	CPU, ServerCPU time.Duration
	// Load is the 1-minute load average when the point started.
	Load float64
	// Measured is the number of measured rounds; Ended and Err as in
	// TurnPoint.
	Measured int
	Ended    string
	Err      string
}

// RoundResults are the tool-round measurements of one run.
type RoundResults struct {
	// Config is their configuration.
	Config RoundsConfig
	// Points holds, per pattern, the rounds of one call at every size,
	// then those of more parallel calls at Sizes[0].
	Points map[string][]RoundPoint
	// Started, Elapsed and the 1-minute load averages before and after.
	Started    time.Time
	Elapsed    time.Duration
	LoadBefore float64
	LoadAfter  float64
}

// Point returns pattern's point at messages and calls, if measured.
func (r *RoundResults) Point(pattern string, messages, calls int) (RoundPoint, bool) {
	if r == nil {
		return RoundPoint{}, false
	}
	for _, p := range r.Points[pattern] {
		if p.Messages == messages && p.Calls == calls && p.Err == "" && p.Measured > 0 {
			return p, true
		}
	}
	return RoundPoint{}, false
}

// roundKey is one point of the measurements.
type roundKey struct{ messages, calls int }

// keys are the points of c in order: one call at every size, then the
// parallel rounds at Sizes[0].
func (c RoundsConfig) keys() []roundKey {
	var out []roundKey
	for _, n := range c.Sizes {
		out = append(out, roundKey{n, 1})
	}
	if len(c.Sizes) > 0 {
		for _, k := range c.callCounts()[1:] {
			out = append(out, roundKey{c.Sizes[0], k})
		}
	}
	return out
}

// rounds runs the tool-round measurements into tr.Rounds: at every point
// sessionflow's rounds, then the sample's, so that the two patterns of a
// point share the machine's load.
func (e *env) rounds(ctx context.Context, tr *TurnResults) error {
	cfg := e.cfg.Turns.Rounds
	rr := &RoundResults{Config: cfg, Points: map[string][]RoundPoint{}, Started: time.Now(), LoadBefore: LoadAverage()}
	tr.Rounds = rr
	defer func() {
		rr.Elapsed = time.Since(rr.Started)
		rr.LoadAfter = LoadAverage()
	}()
	for _, k := range cfg.keys() {
		for _, pattern := range cfg.patterns(k) {
			p := e.roundPoint(ctx, pattern, k.messages, k.calls)
			e.log("  %s tool round, %d messages, %d call(s): %s per round (p90 %s), %d history bytes (%d events) per round%s",
				pattern, k.messages, k.calls, ms(p.Time.Median), ms(p.Time.P90), p.HistoryBytes, p.HistoryEvents, roundErrSuffix(p))
			rr.Points[pattern] = append(rr.Points[pattern], p)
		}
	}
	return ctx.Err()
}

func roundErrSuffix(p RoundPoint) string {
	switch {
	case p.Err != "":
		return "; failed: " + p.Err
	case p.Ended != "":
		return fmt.Sprintf("; %d rounds measured, then %s", p.Measured, p.Ended)
	}
	return ""
}

// roundDriver returns the driver of pattern's tool rounds of calls parallel
// calls, and the name of its model activity.
func (e *env) roundDriver(pattern string, calls int) (turnDriver, string) {
	route := roundProviderName(calls)
	if pattern == PatternSample {
		tools := []provider.Tool{{Name: NoopToolName, Description: NoopTool().Description, Schema: NoopTool().Schema}}
		return &sampleDriver{e: e, route: route, tools: tools, perTurn: 4}, SampleModelActivityName
	}
	return &flowDriver{e: e, route: route, parallel: calls}, wire.CallModelActivity
}

// roundPoint measures pattern's tool rounds of calls parallel calls on
// conversations of n messages: it opens one, runs Warmup rounds then
// PerConversation measured ones, and opens the next, until Rounds are
// measured, so that the conversation stays near n messages.
func (e *env) roundPoint(ctx context.Context, pattern string, n, calls int) RoundPoint {
	p := RoundPoint{Pattern: pattern, Messages: n, Calls: calls, Load: LoadAverage()}
	cfg := e.cfg.Turns.Rounds
	if pattern == PatternSessionflowNoSync && e.syncs != nil {
		e.syncs.skip.Store(true)
		defer e.syncs.skip.Store(false)
	}
	per := cfg.PerConversation
	if per <= 0 {
		per = cfg.Rounds
	}
	var (
		times, turns, syncTimes                []time.Duration
		events, bytess, tevents, tbytes, syncs []int
		parts, segments                        [][]TurnPart
		cpu                                    cpuTimes
		cpuTurns                               int
	)
	// fail ends the point with msg: an error when nothing was measured.
	fail := func(msg string) {
		if len(times) == 0 {
			p.Err = msg
		} else {
			p.Ended = msg
		}
	}
measure:
	for conv := 0; len(times) < cfg.Rounds; conv++ {
		d, model := e.roundDriver(pattern, calls)
		name := fmt.Sprintf("round-%d-%d-%d", n, calls, conv)
		if pattern == PatternSessionflowNoSync {
			// Its own sessions: sessionflow's of this point are closed.
			name = "nosync-" + name
		}
		if err := d.open(ctx, name, n, e.cfg.Turns.ResponseChunks); err != nil {
			fail(err.Error())
			break
		}
		for i := 0; i < cfg.Warmup+per && len(times) < cfg.Rounds; i++ {
			r, err := e.measuredRound(ctx, d, model, messageText(n+4*i, e.cfg.Turns.MessageBytes))
			if err != nil {
				msg := fmt.Sprintf("conversation %d, round %d (messages before it: %d) failed: %v", conv+1, i+1, n+4*i, err)
				if evs, _, herr := e.history(ctx, d.workflowID(), ""); herr == nil {
					msg += "; the run: " + describeEnd(evs)
				}
				fail(msg)
				_ = d.close(ctx)
				break measure
			}
			if i >= cfg.Warmup {
				times = append(times, r.gap)
				syncs = append(syncs, r.syncs)
				syncTimes = append(syncTimes, r.syncTime)
				turns = append(turns, r.turn)
				events = append(events, r.events)
				bytess = append(bytess, r.bytes)
				tevents = append(tevents, r.turnEvents)
				tbytes = append(tbytes, r.turnBytes)
				parts = append(parts, r.parts)
				segments = append(segments, r.segments)
				if r.cpu.ok {
					cpu.self += r.cpu.self
					cpu.server += r.cpu.server
					cpuTurns++
				}
			}
		}
		if err := d.close(ctx); err != nil {
			fail(fmt.Sprintf("closing conversation %d: %v", conv+1, err))
			break
		}
	}
	p.Measured = len(times)
	p.Time = summarize(times)
	p.TurnTime = summarize(turns)
	p.HistoryEvents, p.HistoryBytes = medianInt(events), medianInt(bytess)
	p.TurnEvents, p.TurnBytes = medianInt(tevents), medianInt(tbytes)
	p.Parts = medianParts(parts)
	p.Segments = medianParts(segments)
	p.Syncs, p.SyncTime = medianInt(syncs), summarize(syncTimes).Median
	if cpuTurns > 0 {
		// Means: the server's clock counts in 10 ms ticks, finer than a
		// turn only in the sum.
		p.CPU, p.ServerCPU = cpu.self/time.Duration(cpuTurns), cpu.server/time.Duration(cpuTurns)
	}
	return p
}

// round is one measured tool round.
type round struct {
	gap, turn             time.Duration
	syncs                 int
	syncTime              time.Duration
	events, bytes         int
	turnEvents, turnBytes int
	parts, segments       []TurnPart
	// cpu is the CPU the turn used (see RoundPoint.CPU).
	cpu cpuTimes
}

// measuredRound runs one turn of d holding one tool round and returns the
// round's time as the provider saw it, its history and the turn's.
func (e *env) measuredRound(ctx context.Context, d turnDriver, model, prompt string) (round, error) {
	if e.cfg.Turns.Rounds.TimeOnly {
		return e.timedRound(ctx, d, prompt)
	}
	runID, evs, err := e.quiet(ctx, d.workflowID())
	if err != nil {
		return round{}, err
	}
	from := len(evs)
	e.clock.take()
	c0 := e.cpu()
	t0 := time.Now()
	if err := d.turn(ctx, prompt); err != nil {
		return round{}, err
	}
	el := time.Since(t0)
	cpu := e.cpu().since(c0)
	if _, _, err := e.quiet(ctx, d.workflowID()); err != nil {
		return round{}, err
	}
	gaps, unmatched := e.clock.take()
	if len(gaps) != 1 || unmatched != 0 {
		return round{}, fmt.Errorf("the provider timed %d rounds (and %d calls after tools it did not ask for) in one turn, want 1", len(gaps), unmatched)
	}
	after, _, err := e.history(ctx, d.workflowID(), runID)
	if err != nil {
		return round{}, err
	}
	turn := after[min(from, len(after)):]
	r := round{gap: gaps[0].gap, syncs: gaps[0].syncs, syncTime: gaps[0].syncTime, turn: el, cpu: cpu}
	r.turnEvents, r.turnBytes = turnCost(after, from)
	lo, hi, ok := roundSpan(turn, model)
	if !ok {
		return round{}, fmt.Errorf("the turn's history holds no two %s activities", model)
	}
	r.events, r.bytes = hi-lo+1, 0
	for _, ev := range turn[lo : hi+1] {
		r.bytes += proto.Size(ev)
	}
	r.parts = turnParts(turn[lo : hi+1])
	r.segments = roundSegments(turn, lo, hi, gaps[0].end, gaps[0].start)
	return r, nil
}

// Names of a round's segments.
const (
	segmentFirstEnd  = "model call 1: from its last chunk until the server records its completion"
	segmentBetween   = "from that completion to the next model activity's scheduling (the parts above)"
	segmentDispatch  = "model call 2: from its scheduling until a worker starts it (dispatch)"
	segmentSecondRun = "model call 2: from its start until it calls the model"
)

// roundSegments splits the round of evs from lo to hi (as roundSpan finds
// them), whose first model call ended at end and whose second started at
// start (the provider's clock): the first call's end, the events between
// the two model activities, the second call's dispatch (its scheduling to
// its start event) and its work before the model call. A segment whose
// events are missing is left out.
func roundSegments(evs []*historypb.HistoryEvent, lo, hi int, end, start time.Time) []TurnPart {
	completed := evs[lo].GetEventTime().AsTime()
	scheduled := evs[hi].GetEventTime().AsTime()
	out := []TurnPart{
		{Name: segmentFirstEnd, Count: 1, Median: completed.Sub(end)},
		{Name: segmentBetween, Count: 1, Median: scheduled.Sub(completed)},
	}
	id := evs[hi].GetEventId()
	for _, ev := range evs[hi:] {
		if ev.GetEventType() == enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED && ev.GetActivityTaskStartedEventAttributes().GetScheduledEventId() == id {
			started := ev.GetEventTime().AsTime()
			out = append(out, TurnPart{Name: segmentDispatch, Count: 1, Median: started.Sub(scheduled)},
				TurnPart{Name: segmentSecondRun, Count: 1, Median: start.Sub(started)})
			break
		}
	}
	return out
}

// timedRound runs one turn of d holding one tool round and returns the
// round's time as the provider saw it and the turn's, reading no history.
func (e *env) timedRound(ctx context.Context, d turnDriver, prompt string) (round, error) {
	e.clock.take()
	c0 := e.cpu()
	t0 := time.Now()
	if err := d.turn(ctx, prompt); err != nil {
		return round{}, err
	}
	el := time.Since(t0)
	cpu := e.cpu().since(c0)
	gaps, unmatched := e.clock.take()
	if len(gaps) != 1 || unmatched != 0 {
		return round{}, fmt.Errorf("the provider timed %d rounds (and %d calls after tools it did not ask for) in one turn, want 1", len(gaps), unmatched)
	}
	return round{gap: gaps[0].gap, syncs: gaps[0].syncs, syncTime: gaps[0].syncTime, turn: el, cpu: cpu}, nil
}

// roundSpan returns the indexes in evs of a tool round's first and last
// events: the completion of the first activity of type model, and the
// scheduling of the next one.
func roundSpan(evs []*historypb.HistoryEvent, model string) (lo, hi int, ok bool) {
	scheduled := map[int64]string{}
	lo = -1
	for i, ev := range evs {
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			name := ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName()
			scheduled[ev.GetEventId()] = name
			if lo >= 0 && name == model {
				return lo, i, true
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			if lo < 0 && scheduled[ev.GetActivityTaskCompletedEventAttributes().GetScheduledEventId()] == model {
				lo = i
			}
		}
	}
	return 0, 0, false
}

// cpu reads the CPU used so far by the harness's process and the dev
// server's.
func (e *env) cpu() cpuTimes {
	if e.server == nil {
		return cpuTimes{}
	}
	return readCPU(e.server.PID())
}
