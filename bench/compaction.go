package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"google.golang.org/protobuf/proto"

	"github.com/sessionflow/sessionflow/internal/app/workerapp"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/provider/scripted"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// CompactionProvider is the provider name of the compaction measurement's
// model: the scripted provider behind a callRecorder.
const CompactionProvider = "bench-compaction"

// CompactionConfig sizes the compaction measurement: one session driven
// through Turns turns (client.RunTurn) against the scripted model with a
// context window of Window tokens, every prompt and every answer
// MessageBytes bytes of text. The history of SampleTurns turns is read at
// the start, in the middle and at the end.
type CompactionConfig struct {
	Turns        int
	Window       int64
	MessageBytes int
	SampleTurns  int
	// ModuleDir locates the Temporal CLI (devserver.LocateOptions).
	ModuleDir string
	// Progress receives progress lines; nil discards them.
	Progress io.Writer `json:"-"`
}

// DefaultCompactionConfig returns the sizes of the documented run.
func DefaultCompactionConfig() CompactionConfig {
	return CompactionConfig{Turns: 2000, Window: 16_000, MessageBytes: 1024, SampleTurns: 60, ModuleDir: "."}
}

// CompactionResults are the measurements of one compaction run.
type CompactionResults struct {
	Config CompactionConfig
	// Started, Elapsed and the 1-minute load averages before and after.
	Started    time.Time
	Elapsed    time.Duration
	LoadBefore float64
	LoadAfter  float64
	// Threshold and Retain are the worker's compaction settings (shares
	// of the window): compact at or above Threshold, keep Retain verbatim.
	Threshold, Retain float64
	// Turns is the number of completed turns; Outcome says how the turns
	// ended.
	Turns   int
	Outcome string
	// TurnTimes are the completed turns' durations, from the request until
	// the client sees the turn's end, in order.
	TurnTimes []time.Duration
	// Calls are the model calls the scripted provider received, in order.
	Calls []ModelCall
	// MaxRequestTokens and ScriptedCompactionCalls are the scripted
	// provider's own counters for the session (MaxRequestTokens,
	// CompactionCalls).
	MaxRequestTokens        int
	ScriptedCompactionCalls int
	// Log is what the session log holds at the end.
	Log CompactionLog
	// Runs are the session workflow's runs, in order.
	Runs []RunHistory
	// Compacts are the Compact activities of every run, in order.
	Compacts []CompactActivity
	// Samples are the turns whose history was read, at the start, in the
	// middle and at the end.
	Samples []HistorySample
}

// CompactionLog is what a session log holds of turns and compactions.
type CompactionLog struct {
	Events int
	Bytes  int64
	// TurnStarts and TurnEnds count turn/start and turn/end; Completed the
	// turn/ends of reason completed.
	TurnStarts, TurnEnds, Completed int
	// Starts, Summaries and Ends count the compaction brackets' events,
	// EndErrors the ends that carry an error, Prunes compaction/prune.
	Starts, Summaries, Ends, EndErrors, Prunes int
	// Compactions counts the compactions: brackets in a row (each starting
	// right after the previous one's end) are the pieces of one.
	Compactions int
	// Problems are the first imbalances found (at most maxProblems),
	// ProblemCount all of them.
	Problems     []string
	ProblemCount int
}

// maxProblems bounds CompactionLog.Problems.
const maxProblems = 5

// RunHistory is one run of the session's workflow.
type RunHistory struct {
	// Turns counts the Followup updates the run accepted (one per turn).
	Turns int
	// Events and Bytes are its history (the encoded size of the events);
	// StartBytes is its first event's (the start of the run, with the state
	// a continue-as-new carried).
	Events, Bytes, StartBytes int
	// Compacts counts its Compact activities.
	Compacts int
	// ContinuedAsNew reports that it ended by continuing as new.
	ContinuedAsNew bool
}

// CompactActivity is one Compact activity, from its scheduling to its
// completion (or failure) in history.
type CompactActivity struct {
	// Compaction numbers the compaction it belongs to (0-based): Compact
	// activities with no other activity scheduled between them are the
	// pieces of one compaction.
	Compaction int
	// Trigger is its input's trigger.
	Trigger string
	// Summarised reports that its result has a summary.
	Summarised bool
	// Failed reports that it failed, timed out or was cancelled.
	Failed bool
	Time   time.Duration
}

// HistorySample is a run of consecutive turns whose history was read
// before and after each.
type HistorySample struct {
	Name  string
	Turns []SampledTurn
}

// SampledTurn is what one turn added to its run's history (as TurnPoint
// measures it), the Compact activities it ran, and whether it carries
// events a run records once: RunFirst for the first turn of its run (the
// run's version markers and search attributes), RunFirstCompaction for the
// first turn of its run that compacts (the compaction's version marker),
// ContinuedAsNew for the turn after which the run continued as new.
type SampledTurn struct {
	Turn               int
	Events             int
	Bytes              int
	Compacts           int
	RunFirst           bool `json:",omitempty"`
	RunFirstCompaction bool `json:",omitempty"`
	ContinuedAsNew     bool `json:",omitempty"`
	Time               time.Duration
}

// OneOff reports whether the turn carries events a run records once.
func (t SampledTurn) OneOff() bool { return t.RunFirst || t.RunFirstCompaction || t.ContinuedAsNew }

// compactionAnswer is the scripted model's answer: size bytes of text.
func compactionAnswer(size int) string {
	return strings.Replace(messageText(0, size), "message 0: ", "answer 0: ", 1)
}

// compactionScript is the scripted model of the measurement: one looping
// answer of cfg.MessageBytes bytes in chunks of 128, the window of cfg, the
// default summary for compaction calls, and no usage (the worker measures
// the requests with its own estimate).
func compactionScript(cfg CompactionConfig) scripted.Script {
	return scripted.Script{Loop: true, ContextWindow: cfg.Window,
		Responses: []scripted.Response{{Text: compactionAnswer(cfg.MessageBytes), ChunkSize: 128}}}
}

// sampleWindows returns the first turn of the start, middle and end
// samples of n turns each out of turns.
func sampleWindows(turns, n int) (names []string, firsts []int, size int) {
	size = min(n, turns/3)
	if size <= 0 {
		return nil, nil, 0
	}
	return []string{"start", "middle", "end"}, []int{1, turns/2 - size/2 + 1, turns - size + 1}, size
}

// RunCompaction starts a dev server and a worker whose provider
// CompactionProvider is the scripted model of cfg, drives one session
// through cfg.Turns turns and reads back its model calls, its log and its
// history.
func RunCompaction(ctx context.Context, cfg CompactionConfig) (*CompactionResults, error) {
	logf := func(format string, args ...any) {
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, "perf: compaction: "+format+"\n", args...)
		}
	}
	sp, err := scripted.New(compactionScript(cfg))
	if err != nil {
		return nil, fmt.Errorf("the scripted model: %w", err)
	}
	rec := &callRecorder{p: sp}
	bcfg := DefaultConfig()
	bcfg.ModuleDir, bcfg.Progress = cfg.ModuleDir, cfg.Progress
	bcfg.extraProviders = provider.Set{CompactionProvider: rec}
	wc := workerapp.DefaultConfig().Agent.Compaction
	res := &CompactionResults{Config: cfg, Started: time.Now(), LoadBefore: LoadAverage(), Threshold: wc.Threshold, Retain: wc.Retain}
	e, err := start(ctx, bcfg, logf)
	if err != nil {
		return nil, err
	}
	defer func() { _ = e.stop() }()
	if err := e.compaction(ctx, cfg, rec, sp, res); err != nil {
		return nil, err
	}
	res.LoadAfter = LoadAverage()
	res.Elapsed = time.Since(res.Started)
	if err := e.stop(); err != nil {
		return nil, fmt.Errorf("stopping: %w", err)
	}
	return res, nil
}

// compaction drives the measurement's session and reads it back into res.
func (e *env) compaction(ctx context.Context, cfg CompactionConfig, rec *callRecorder, sp *scripted.Provider, res *CompactionResults) error {
	const id = "compaction"
	s, err := e.sf.Create(ctx, wire.CreateSessionRequest{SessionID: id, Meta: &wire.SessionMeta{Cwd: "/bench"},
		AgentOptions: &wire.AgentOptions{Provider: CompactionProvider, Model: "bench"}})
	if err != nil {
		return fmt.Errorf("creating %s: %w", id, err)
	}
	d := &flowDriver{e: e, id: id, wid: s.WorkflowID}
	first, _, err := e.quiet(ctx, d.wid)
	if err != nil {
		return err
	}
	names, firsts, size := sampleWindows(cfg.Turns, cfg.SampleTurns)
	sample := func(turn int) int {
		for i, f := range firsts {
			if turn >= f && turn < f+size {
				return i
			}
		}
		return -1
	}
	for _, n := range names {
		res.Samples = append(res.Samples, HistorySample{Name: n})
	}
	res.Outcome = fmt.Sprintf("%d turns completed", cfg.Turns)
	t0 := time.Now()
	for turn := 1; turn <= cfg.Turns; turn++ {
		rec.setTurn(turn)
		prompt := messageText(2*(turn-1), cfg.MessageBytes)
		var el time.Duration
		if k := sample(turn); k >= 0 {
			var st SampledTurn
			st, err = e.sampledTurn(ctx, d, turn, prompt)
			if err == nil {
				el = st.Time
				res.Samples[k].Turns = append(res.Samples[k].Turns, st)
			}
		} else {
			t1 := time.Now()
			err = d.turn(ctx, prompt)
			el = time.Since(t1)
		}
		if err != nil {
			res.Outcome = fmt.Sprintf("turn %d failed: %v", turn, err)
			if evs, _, herr := e.history(ctx, d.wid, ""); herr == nil {
				res.Outcome += "; the run: " + describeEnd(evs)
			}
			break
		}
		res.TurnTimes = append(res.TurnTimes, el)
		res.Turns++
		if turn%250 == 0 {
			e.log("  %d turns in %s, %d compaction calls so far", turn, time.Since(t0).Round(time.Second), sp.CompactionCalls(id))
		}
	}
	res.Calls = rec.recorded()
	res.MaxRequestTokens = sp.MaxRequestTokens(id)
	res.ScriptedCompactionCalls = sp.CompactionCalls(id)
	if _, err := e.sf.Dispose(ctx, id); err != nil {
		return fmt.Errorf("disposing %s: %w", id, err)
	}
	var runs [][]*historypb.HistoryEvent
	var sizes []int
	if err := e.eachRun(ctx, d.wid, first, func(evs []*historypb.HistoryEvent, b int) {
		runs = append(runs, evs)
		sizes = append(sizes, b)
	}); err != nil {
		return err
	}
	res.Runs, res.Compacts = analyzeRuns(runs, sizes)
	evs, bytes, err := readLog(ctx, e.store, id)
	if err != nil {
		return err
	}
	res.Log = analyzeLog(evs)
	res.Log.Bytes = bytes
	e.log("  %s; %d compactions, %d pieces, %d runs", res.Outcome, res.Log.Compactions, res.Log.Summaries, len(res.Runs))
	return nil
}

// sampledTurn runs one turn of d and reads what it added to its run's
// history, with the history at rest before and after it.
func (e *env) sampledTurn(ctx context.Context, d *flowDriver, turn int, prompt string) (SampledTurn, error) {
	runID, before, err := e.quiet(ctx, d.wid)
	if err != nil {
		return SampledTurn{}, err
	}
	t0 := time.Now()
	if err := d.turn(ctx, prompt); err != nil {
		return SampledTurn{}, err
	}
	el := time.Since(t0)
	latest, _, err := e.quiet(ctx, d.wid)
	if err != nil {
		return SampledTurn{}, err
	}
	after, _, err := e.history(ctx, d.wid, runID)
	if err != nil {
		return SampledTurn{}, err
	}
	from := min(len(before), len(after))
	st := SampledTurn{Turn: turn, Time: el, ContinuedAsNew: latest != runID}
	st.Events, st.Bytes = turnCost(after, from)
	for _, p := range turnParts(after[from:]) {
		if p.Name == wire.CompactActivity {
			st.Compacts = p.Count
		}
	}
	runs, _ := analyzeRuns([][]*historypb.HistoryEvent{before}, []int{0})
	st.RunFirst = runs[0].Turns == 0
	st.RunFirstCompaction = st.Compacts > 0 && runs[0].Compacts == 0
	return st, nil
}

// readLog reads every event of session id's log in st, and the log's size.
func readLog(ctx context.Context, st *jsonl.Store, id string) ([]session.Event, int64, error) {
	h, err := st.Open(ctx, id, jsonl.AccessRead, jsonl.OpenOptions{})
	if err != nil {
		return nil, 0, fmt.Errorf("opening the log of %s: %w", id, err)
	}
	defer func() { _ = h.Close(ctx) }()
	evs, err := h.Read(ctx, 0, -1)
	if err != nil {
		return nil, 0, fmt.Errorf("reading the log of %s: %w", id, err)
	}
	var size int64
	if snap, err := st.Stat(ctx, id); err == nil && snap != nil {
		size = snap.SizeBytes
	}
	return evs, size, nil
}

// analyzeRuns reads the runs' histories (sizes: their encoded bytes): the
// Followup updates and Compact activities of each, and every Compact
// activity's trigger, outcome and time, grouped into compactions.
func analyzeRuns(runs [][]*historypb.HistoryEvent, sizes []int) ([]RunHistory, []CompactActivity) {
	var (
		out      []RunHistory
		compacts []CompactActivity
	)
	group := -1
	for i, evs := range runs {
		r := RunHistory{Events: len(evs), Bytes: sizes[i]}
		if len(evs) > 0 {
			r.StartBytes = proto.Size(evs[0])
		}
		type open struct {
			index int
			at    time.Time
		}
		scheduled := map[int64]open{}
		inCompaction := false
		end := func(id int64, at time.Time, failed bool, result []byte) {
			o, ok := scheduled[id]
			if !ok {
				return
			}
			c := &compacts[o.index]
			c.Time, c.Failed = at.Sub(o.at), failed
			var res struct {
				SummarySeq *int64 `json:"summarySeq"`
			}
			if result != nil && json.Unmarshal(result, &res) == nil && res.SummarySeq != nil {
				c.Summarised = *res.SummarySeq >= 0
			}
		}
		for _, ev := range evs {
			at := ev.GetEventTime().AsTime()
			switch ev.GetEventType() {
			case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
				if ev.GetWorkflowExecutionUpdateAcceptedEventAttributes().GetAcceptedRequest().GetInput().GetName() == wire.UpdateFollowup {
					r.Turns++
				}
			case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
				a := ev.GetActivityTaskScheduledEventAttributes()
				if a.GetActivityType().GetName() != wire.CompactActivity {
					inCompaction = false
					continue
				}
				if !inCompaction {
					group++
				}
				inCompaction = true
				var in struct {
					Trigger string `json:"trigger"`
				}
				if ps := a.GetInput().GetPayloads(); len(ps) > 0 {
					_ = json.Unmarshal(ps[0].GetData(), &in)
				}
				compacts = append(compacts, CompactActivity{Compaction: group, Trigger: in.Trigger})
				scheduled[ev.GetEventId()] = open{len(compacts) - 1, at}
				r.Compacts++
			case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
				a := ev.GetActivityTaskCompletedEventAttributes()
				var data []byte
				if ps := a.GetResult().GetPayloads(); len(ps) > 0 {
					data = ps[0].GetData()
				}
				end(a.GetScheduledEventId(), at, false, data)
			case enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED:
				end(ev.GetActivityTaskFailedEventAttributes().GetScheduledEventId(), at, true, nil)
			case enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
				end(ev.GetActivityTaskTimedOutEventAttributes().GetScheduledEventId(), at, true, nil)
			case enumspb.EVENT_TYPE_ACTIVITY_TASK_CANCELED:
				end(ev.GetActivityTaskCanceledEventAttributes().GetScheduledEventId(), at, true, nil)
			case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
				r.ContinuedAsNew = true
			}
		}
		out = append(out, r)
	}
	return out, compacts
}

// analyzeLog counts a session log's turns and compaction brackets and
// checks that they are balanced: turns do not nest and every turn/start
// has its turn/end; a bracket (compaction/start, at most one
// compaction/summary followed by its replacing user/message, then
// compaction/end, of one compactionId) does not nest, has no turn boundary
// inside it, ends with an error exactly when it has no summary, and is
// closed by the end of the log.
func analyzeLog(evs []session.Event) CompactionLog {
	l := CompactionLog{Events: len(evs)}
	problem := func(format string, args ...any) {
		l.ProblemCount++
		if len(l.Problems) < maxProblems {
			l.Problems = append(l.Problems, fmt.Sprintf(format, args...))
		}
	}
	var bracketData struct {
		CompactionID string `json:"compactionId"`
		Error        string `json:"error"`
	}
	decode := func(e session.Event) (string, string) {
		bracketData.CompactionID, bracketData.Error = "", ""
		if err := json.Unmarshal(e.Data, &bracketData); err != nil {
			problem("%s (seq %d): %v", e.Type, e.Seq, err)
		}
		return bracketData.CompactionID, bracketData.Error
	}
	var (
		inTurn      bool
		open        string // the open bracket's id
		openSeq     int64
		summarySeq  int64 = -1
		lastEnd     int64 = -2
		wantReplace int64 = -1
	)
	for _, e := range evs {
		if wantReplace >= 0 && e.Seq == wantReplace {
			if e.Type != wire.TypeUserMessage || e.SurfaceOp == nil || e.SurfaceOp.Op != session.SurfaceReplace {
				problem("seq %d: %s after the compaction/summary at %d, not its replacing user/message", e.Seq, e.Type, wantReplace-1)
			}
			wantReplace = -1
		}
		switch e.Type {
		case wire.TypeTurnStart:
			l.TurnStarts++
			if inTurn {
				problem("seq %d: turn/start inside a turn", e.Seq)
			}
			if open != "" {
				problem("seq %d: turn/start inside compaction %s", e.Seq, open)
			}
			inTurn = true
		case wire.TypeTurnEnd:
			l.TurnEnds++
			if !inTurn {
				problem("seq %d: turn/end outside a turn", e.Seq)
			}
			if open != "" {
				problem("seq %d: turn/end inside compaction %s", e.Seq, open)
			}
			inTurn = false
			var d wire.TurnEnd
			if json.Unmarshal(e.Data, &d) == nil && d.Reason.Kind == wire.TurnEndCompleted {
				l.Completed++
			}
		case wire.TypeCompactionPrune:
			l.Prunes++
		case wire.TypeCompactionStart:
			l.Starts++
			id, _ := decode(e)
			if open != "" {
				problem("seq %d: compaction/start of %s inside compaction %s", e.Seq, id, open)
			}
			if e.Seq != lastEnd+1 {
				l.Compactions++
			}
			open, openSeq, summarySeq = id, e.Seq, -1
		case wire.TypeCompactionSummary:
			l.Summaries++
			id, _ := decode(e)
			switch {
			case open == "":
				problem("seq %d: compaction/summary of %s outside a compaction", e.Seq, id)
			case id != open:
				problem("seq %d: compaction/summary of %s inside compaction %s", e.Seq, id, open)
			case summarySeq >= 0:
				problem("seq %d: a second compaction/summary of %s", e.Seq, id)
			default:
				summarySeq = e.Seq
			}
			wantReplace = e.Seq + 1
		case wire.TypeCompactionEnd:
			l.Ends++
			id, errText := decode(e)
			if errText != "" {
				l.EndErrors++
			}
			switch {
			case open == "":
				problem("seq %d: compaction/end of %s outside a compaction", e.Seq, id)
			case id != open:
				problem("seq %d: compaction/end of %s inside compaction %s (started at %d)", e.Seq, id, open, openSeq)
			case summarySeq >= 0 && errText != "":
				problem("seq %d: compaction/end of %s with an error after its summary: %s", e.Seq, id, errText)
			case summarySeq < 0 && errText == "":
				problem("seq %d: compaction/end of %s without a summary or an error", e.Seq, id)
			}
			open, lastEnd = "", e.Seq
		}
	}
	if open != "" {
		problem("compaction %s (started at %d) is not closed", open, openSeq)
	}
	if inTurn {
		problem("the last turn is not closed")
	}
	return l
}
